//! The Gorilla encoding (Pelkonen et al., VLDB 2015, §4.1), the baseline the store's pcodec
//! chunks are measured against: times as delta-of-delta in variable-width buckets, values as the
//! XOR with the previous value, written as the meaningful bits inside a leading/trailing-zero
//! window. Times are microseconds here, so the widest bucket takes 64 bits, lossless for any
//! series; the decoder exists to prove that the sizes measured are of lossless encodings.

/// Bits appended to a byte vector, most significant first.
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    used: u32,
}

impl Bits {
    fn push(&mut self, value: u64, width: u32) {
        for i in (0..width).rev() {
            if self.used.is_multiple_of(8) {
                self.bytes.push(0);
            }
            if (value >> i) & 1 == 1
                && let Some(last) = self.bytes.last_mut()
            {
                *last |= 0x80 >> (self.used % 8);
            }
            self.used += 1;
        }
    }
}

struct Read<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Read<'_> {
    fn take(&mut self, width: u32) -> Option<u64> {
        let mut value = 0u64;
        for _ in 0..width {
            let byte = *self.bytes.get(self.at / 8)?;
            value = (value << 1) | u64::from((byte >> (7 - self.at % 8)) & 1);
            self.at += 1;
        }
        Some(value)
    }
}

/// The delta-of-delta buckets: a prefix of ones ended by a zero (none for the widest), then a
/// signed value of the bucket's width.
const BUCKETS: [(u64, u32, u32); 4] = [(0b10, 2, 7), (0b110, 3, 9), (0b1110, 4, 12), (0b11110, 5, 32)];

/// Encodes times (microseconds) and values.
pub fn encode(times: &[i64], values: &[f64]) -> Vec<u8> {
    let mut bits = Bits::default();
    let (Some(&t0), Some(&v0)) = (times.first(), values.first()) else {
        return bits.bytes;
    };
    bits.push(t0 as u64, 64);
    bits.push(v0.to_bits(), 64);
    let (mut previous_time, mut previous_delta) = (t0, 0i64);
    let (mut previous_value, mut window) = (v0.to_bits(), (65u32, 0u32));
    for (&t, &v) in times.iter().zip(values).skip(1) {
        let delta = t.wrapping_sub(previous_time);
        let dod = delta.wrapping_sub(previous_delta);
        (previous_time, previous_delta) = (t, delta);
        if dod == 0 {
            bits.push(0, 1);
        } else if let Some(&(prefix, len, width)) = BUCKETS.iter().find(|(_, _, w)| fits(dod, *w)) {
            bits.push(prefix, len);
            bits.push(dod as u64 & mask(width), width);
        } else {
            bits.push(0b11111, 5);
            bits.push(dod as u64, 64);
        }
        let xor = v.to_bits() ^ previous_value;
        previous_value = v.to_bits();
        if xor == 0 {
            bits.push(0, 1);
            continue;
        }
        let (leading, trailing) = (xor.leading_zeros().min(31), xor.trailing_zeros());
        if window.0 <= leading && window.1 <= trailing && window.0 != 65 {
            bits.push(0b10, 2);
            let meaningful = 64 - window.0 - window.1;
            bits.push(xor >> window.1, meaningful);
        } else {
            let meaningful = 64 - leading - trailing;
            bits.push(0b11, 2);
            bits.push(u64::from(leading), 5);
            // 64 meaningful bits are written as 0: six bits hold 0 to 63.
            bits.push(u64::from(meaningful % 64), 6);
            bits.push(xor >> trailing, meaningful);
            window = (leading, trailing);
        }
    }
    bits.bytes
}

/// Decodes `n` points written by [`encode`].
pub fn decode(bytes: &[u8], n: usize) -> Option<(Vec<i64>, Vec<f64>)> {
    let mut read = Read { bytes, at: 0 };
    let (mut times, mut values) = (Vec::with_capacity(n), Vec::with_capacity(n));
    if n == 0 {
        return Some((times, values));
    }
    let (mut previous_time, mut previous_delta) = (read.take(64)? as i64, 0i64);
    let mut previous_value = read.take(64)?;
    times.push(previous_time);
    values.push(f64::from_bits(previous_value));
    let mut window = (0u32, 0u32);
    while times.len() < n {
        let mut ones = 0;
        while ones < 5 && read.take(1)? == 1 {
            ones += 1;
        }
        let dod = match ones {
            0 => 0,
            5 => read.take(64)? as i64,
            k => {
                let width = BUCKETS[k - 1].2;
                signed(read.take(width)?, width)
            }
        };
        previous_delta = previous_delta.wrapping_add(dod);
        previous_time = previous_time.wrapping_add(previous_delta);
        times.push(previous_time);
        if read.take(1)? == 1 {
            if read.take(1)? == 1 {
                let leading = read.take(5)? as u32;
                let meaningful = match read.take(6)? as u32 {
                    0 => 64,
                    m => m,
                };
                window = (leading, 64 - leading - meaningful);
            }
            let meaningful = 64 - window.0 - window.1;
            previous_value ^= read.take(meaningful)? << window.1;
        }
        values.push(f64::from_bits(previous_value));
    }
    Some((times, values))
}

fn fits(v: i64, width: u32) -> bool {
    let half = 1i64 << (width - 1);
    (-half..half).contains(&v)
}

fn mask(width: u32) -> u64 {
    if width == 64 { u64::MAX } else { (1u64 << width) - 1 }
}

fn signed(v: u64, width: u32) -> i64 {
    let shift = 64 - width;
    ((v << shift) as i64) >> shift
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_come_back_to_the_bit() {
        let times: Vec<i64> = [
            0i64,
            1_000_000,
            2_000_000,
            2_000_001,
            9_000_000_000,
            -5,
            i64::MAX,
            i64::MIN,
        ]
        .to_vec();
        let values = [1.0, 1.0, -0.0, 3.25, f64::MAX, 1e-310, 0.1, 7.0];
        let bytes = encode(&times, &values);
        let (t, v) = decode(&bytes, times.len()).unwrap();
        assert_eq!(t, times);
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&v), bits(&values));
    }
}
