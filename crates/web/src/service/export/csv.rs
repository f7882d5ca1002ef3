//! The export as CSV: a header of the raw data record's fields in its order, then one line a
//! point (docs/api.md, "Export"). A value is written as in the JSON record (the shortest text
//! that reads back as the same double).

use std::collections::HashMap;
use std::io::Write;

use bytes::Bytes;
use devicecloud_store::chunks::Point;
use devicecloud_store::series::Series;

use super::Encoder;
use crate::service::sessions::csv_text;

/// The header line.
const HEADER: &str = "id_container_data_latest,id_group,datatype,source_device,timestamp_seconds,microseconds,value\n";

/// Microseconds in a second.
const MICROS: i64 = 1_000_000;

/// Lines a piece sent to the client holds: about a megabyte.
const LINES_PER_PIECE: usize = 12_000;

/// The CSV encoder: the text before a point's time, written once a series.
pub(super) struct Csv {
    prefixes: HashMap<i64, String>,
}

impl Csv {
    pub(super) fn new(series: &HashMap<i64, Series>) -> Csv {
        let prefixes = series
            .iter()
            .map(|(key, s)| {
                let prefix = format!(
                    "{},{},{},{},",
                    csv_text(&s.id_container_data_latest),
                    csv_text(&s.id_group),
                    s.datatype,
                    csv_text(&s.source_device)
                );
                (*key, prefix)
            })
            .collect();
        Csv { prefixes }
    }
}

impl Encoder for Csv {
    fn start(&mut self) -> std::io::Result<Vec<Bytes>> {
        Ok(vec![Bytes::from_static(HEADER.as_bytes())])
    }

    fn batch(&mut self, points: &[Point]) -> std::io::Result<Vec<Bytes>> {
        let mut pieces = Vec::with_capacity(points.len() / LINES_PER_PIECE + 1);
        for part in points.chunks(LINES_PER_PIECE) {
            let mut out = Vec::with_capacity(part.len() * 96);
            for p in part {
                let Some(prefix) = self.prefixes.get(&p.key) else {
                    continue;
                };
                out.extend_from_slice(prefix.as_bytes());
                write!(
                    out,
                    "{},{},",
                    p.time_us.div_euclid(MICROS),
                    p.time_us.rem_euclid(MICROS)
                )?;
                serde_json::to_writer(&mut out, &p.value).map_err(std::io::Error::other)?;
                out.push(b'\n');
            }
            pieces.push(Bytes::from(out));
        }
        Ok(pieces)
    }

    fn finish(self: Box<Self>) -> std::io::Result<Vec<Bytes>> {
        Ok(Vec::new())
    }
}
