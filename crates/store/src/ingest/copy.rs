//! Raw points in PostgreSQL's binary `COPY` format (postgresql.org/docs/15/sql-copy.html,
//! "Binary Format"): the first try of a batch goes in by `COPY … FROM STDIN (FORMAT binary)`.
//!
//! A `COPY` writes a page's worth of rows with one heap call and one log record, where an
//! `INSERT … SELECT` writes and logs every row on its own; the values travel as the 8-byte
//! big-endian integers and floats PostgreSQL stores, so nothing is parsed either
//! (docs/benchmarks.md, "Ingest").

use super::sql::PointColumns;

/// The statement the rows of [`binary`] are sent with.
pub(super) const STATEMENT: &str =
    "COPY raw_points (container_key, time_us, value, session_key) FROM STDIN (FORMAT binary)";

/// The points as one binary `COPY` stream: the signature, no flags, no header extension, a row
/// of four fields per point, and the trailer.
pub(super) fn binary(points: &PointColumns) -> Vec<u8> {
    const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";
    // Per row: the field count (2 bytes), then each field's length (4) and value (8).
    let mut out = Vec::with_capacity(SIGNATURE.len() + 8 + points.keys.len() * (2 + 4 * 12) + 2);
    out.extend_from_slice(SIGNATURE);
    out.extend_from_slice(&0_i32.to_be_bytes()); // flags: no OIDs
    out.extend_from_slice(&0_i32.to_be_bytes()); // header extension length
    let field = |out: &mut Vec<u8>, value: [u8; 8]| {
        out.extend_from_slice(&8_i32.to_be_bytes());
        out.extend_from_slice(&value);
    };
    for i in 0..points.keys.len() {
        out.extend_from_slice(&4_i16.to_be_bytes());
        field(&mut out, points.keys[i].to_be_bytes());
        field(&mut out, points.times[i].to_be_bytes());
        field(&mut out, points.values[i].to_be_bytes());
        match points.sessions[i] {
            Some(session) => field(&mut out, session.to_be_bytes()),
            None => out.extend_from_slice(&(-1_i32).to_be_bytes()), // NULL
        }
    }
    out.extend_from_slice(&(-1_i16).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_four_length_prefixed_big_endian_fields() {
        let points = PointColumns {
            keys: vec![7],
            times: vec![1_700_000_000_250_000],
            values: vec![1.5],
            sessions: vec![None],
        };
        let out = binary(&points);
        assert_eq!(&out[..11], b"PGCOPY\n\xff\r\n\0");
        let row = &out[19..out.len() - 2];
        assert_eq!(&row[..2], &[0, 4]);
        assert_eq!(&row[2..6], &[0, 0, 0, 8]);
        assert_eq!(&row[6..14], &7_i64.to_be_bytes());
        assert_eq!(&row[18..26], &1_700_000_000_250_000_i64.to_be_bytes());
        assert_eq!(&row[30..38], &1.5_f64.to_bits().to_be_bytes());
        assert_eq!(&row[38..], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&out[out.len() - 2..], &[0xff, 0xff]);
    }
}
