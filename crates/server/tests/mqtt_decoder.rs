//! The MQTT decoder (rmqtt-codec, as the endpoint drives it) fed with random and mutated
//! bytes: it must never panic, whatever arrives on the socket. Cases: `PROPTEST_CASES`
//! (a million for the recorded run, see docs/benchmarks.md).

use bytes::BytesMut;
use proptest::prelude::*;
use rmqtt_codec::version::VersionCodec;
use rmqtt_codec::{MqttCodec, v3, v5};
use tokio_util::codec::Decoder;

/// Valid packets to start mutations from: CONNECT (3.1.1 and 5), PUBLISH QoS 0/1, SUBSCRIBE,
/// PINGREQ, DISCONNECT.
const SEEDS: &[&[u8]] = &[
    b"\x10\x1a\x00\x04MQTT\x04\xc2\x00\x3c\x00\x02gw\x00\x04GW-1\x00\x04toke",
    b"\x10\x1b\x00\x04MQTT\x05\xc2\x00\x3c\x00\x00\x02gw\x00\x04GW-1\x00\x04toke",
    b"\x30\x1f\x00\x17v1/gateway/measurements{\"values\"",
    b"\x32\x21\x00\x17v1/gateway/measurements\x00\x01{\"values\"",
    b"\x82\x1a\x00\x01\x00\x15v1/gateway/commands/+\x01",
    b"\xc0\x00",
    b"\xe0\x00",
];

/// Decodes everything in `bytes` the way a connection does: version detection, then the
/// version's codec, packet after packet until an error or the end of the bytes.
fn decode_all(bytes: &[u8], max: u32) {
    let mut buf = BytesMut::from(bytes);
    let mut codec = MqttCodec::Version(VersionCodec);
    for _ in 0..64 {
        match codec.decode(&mut buf) {
            Ok(Some((rmqtt_codec::MqttPacket::Version(v), _))) => {
                codec = match v {
                    rmqtt_codec::version::ProtocolVersion::MQTT3 => MqttCodec::V3(v3::Codec::new(max)),
                    rmqtt_codec::version::ProtocolVersion::MQTT5 => MqttCodec::V5(v5::Codec::new(max, max)),
                };
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        0..SEEDS.len(),
        proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        0usize..40,
    )
        .prop_map(|(seed, edits, cut)| {
            let mut bytes = SEEDS[seed].to_vec();
            for (at, byte) in edits {
                let at = at % (bytes.len() + 1);
                if at == bytes.len() {
                    bytes.push(byte);
                } else {
                    bytes[at] = byte;
                }
            }
            let keep = bytes.len().saturating_sub(cut % 4);
            bytes.truncate(keep);
            bytes
        })
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes, 256 * 1024);
        decode_all(&bytes, 16);
    }

    #[test]
    fn mutated_packets_never_panic(first in mutated(), second in mutated()) {
        let mut stream = first;
        stream.extend(second);
        decode_all(&stream, 256 * 1024);
        decode_all(&stream, 24);
    }
}
