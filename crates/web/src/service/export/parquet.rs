//! The export as Parquet: one row group a batch, the columns of the raw data record in its
//! order (`timestamp_seconds` and `microseconds` int64, `datatype` int32, `value` double, the
//! ids strings), Snappy pages with dictionaries (the ids and seconds repeat), statistics of the
//! time and value per row group (docs/api.md, "Export").

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use devicecloud_store::chunks::Point;
use devicecloud_store::series::Series;
use parquet::basic::Compression;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type, Int64Type};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;

use super::Encoder;

/// The file's schema.
const SCHEMA: &str = "message raw_data {
    REQUIRED BYTE_ARRAY id_container_data_latest (STRING);
    REQUIRED BYTE_ARRAY id_group (STRING);
    REQUIRED INT32 datatype;
    REQUIRED BYTE_ARRAY source_device (STRING);
    REQUIRED INT64 timestamp_seconds;
    REQUIRED INT64 microseconds;
    REQUIRED DOUBLE value;
}";

/// Values handed to a column writer at a time, so that the byte arrays of a batch are never all
/// in memory at once.
const VALUES_PER_WRITE: usize = 8_192;

/// What each column of [`SCHEMA`] holds, in its order.
#[derive(Clone, Copy)]
enum Column {
    /// One of a series' three ids, by its index in [`Cells::ids`].
    Id(usize),
    Datatype,
    Seconds,
    Micros,
    Value,
}

const COLUMNS: [Column; 7] = [
    Column::Id(0),
    Column::Id(1),
    Column::Datatype,
    Column::Id(2),
    Column::Seconds,
    Column::Micros,
    Column::Value,
];

/// The cells of a series, shared by every point of it.
#[derive(Clone)]
struct Cells {
    /// `id_container_data_latest`, `id_group`, `source_device`.
    ids: [ByteArray; 3],
    datatype: i32,
}

/// The Parquet encoder: the file writer over a buffer emptied after every row group.
pub(super) struct Parquet {
    writer: Option<SerializedFileWriter<Vec<u8>>>,
    cells: HashMap<i64, Cells>,
}

impl Parquet {
    pub(super) fn new(series: &HashMap<i64, Series>) -> Result<Parquet, ParquetError> {
        let schema = Arc::new(parse_message_type(SCHEMA)?);
        // Statistics (min and max per row group) where a reader can skip row groups by them:
        // the time and the value, not the ids that every row group of one series repeats.
        let mut properties = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk);
        for column in ["id_container_data_latest", "id_group", "datatype", "source_device"] {
            properties = properties.set_column_statistics_enabled(ColumnPath::from(column), EnabledStatistics::None);
        }
        let properties = properties.build();
        let text = |text: &str| ByteArray::from(Bytes::copy_from_slice(text.as_bytes()));
        let cells = series
            .iter()
            .map(|(key, s)| {
                let cells = Cells {
                    ids: [
                        text(&s.id_container_data_latest),
                        text(&s.id_group),
                        text(&s.source_device),
                    ],
                    datatype: i32::try_from(s.datatype).unwrap_or(i32::MAX),
                };
                (*key, cells)
            })
            .collect();
        Ok(Parquet {
            writer: Some(SerializedFileWriter::new(Vec::new(), schema, Arc::new(properties))?),
            cells,
        })
    }

    /// The bytes written so far, taken out of the buffer.
    fn take(&mut self) -> std::io::Result<Vec<Bytes>> {
        let writer = self.writer.as_mut().ok_or_else(closed)?;
        writer.flush()?;
        // The writer counts the bytes it wrote itself, so emptying its buffer keeps the
        // offsets of the footer right.
        let bytes = std::mem::take(writer.inner_mut());
        Ok(if bytes.is_empty() {
            Vec::new()
        } else {
            vec![Bytes::from(bytes)]
        })
    }

    /// One row group of `points`, written column after column.
    fn row_group(&mut self, points: &[Point]) -> Result<(), ParquetError> {
        let rows: Vec<(&Cells, &Point)> = points
            .iter()
            .filter_map(|p| Some((self.cells.get(&p.key)?, p)))
            .collect();
        let writer = self
            .writer
            .as_mut()
            .ok_or_else(|| ParquetError::General("the file is closed".into()))?;
        let mut group = writer.next_row_group()?;
        for column in COLUMNS {
            let Some(mut out) = group.next_column()? else {
                return Err(ParquetError::General(
                    "the schema has fewer columns than written".into(),
                ));
            };
            for part in rows.chunks(VALUES_PER_WRITE) {
                match column {
                    Column::Id(i) => {
                        let values: Vec<ByteArray> = part.iter().map(|(c, _)| c.ids[i].clone()).collect();
                        out.typed::<ByteArrayType>().write_batch(&values, None, None)?;
                    }
                    Column::Datatype => {
                        let values: Vec<i32> = part.iter().map(|(c, _)| c.datatype).collect();
                        out.typed::<Int32Type>().write_batch(&values, None, None)?;
                    }
                    Column::Seconds => {
                        let values: Vec<i64> = part.iter().map(|(_, p)| p.time_us.div_euclid(MICROS)).collect();
                        out.typed::<Int64Type>().write_batch(&values, None, None)?;
                    }
                    Column::Micros => {
                        let values: Vec<i64> = part.iter().map(|(_, p)| p.time_us.rem_euclid(MICROS)).collect();
                        out.typed::<Int64Type>().write_batch(&values, None, None)?;
                    }
                    Column::Value => {
                        let values: Vec<f64> = part.iter().map(|(_, p)| p.value).collect();
                        out.typed::<DoubleType>().write_batch(&values, None, None)?;
                    }
                }
            }
            out.close()?;
        }
        group.close()?;
        Ok(())
    }
}

/// Microseconds in a second.
const MICROS: i64 = 1_000_000;

impl Encoder for Parquet {
    fn start(&mut self) -> std::io::Result<Vec<Bytes>> {
        self.take()
    }

    fn batch(&mut self, points: &[Point]) -> std::io::Result<Vec<Bytes>> {
        self.row_group(points).map_err(std::io::Error::other)?;
        self.take()
    }

    fn finish(mut self: Box<Self>) -> std::io::Result<Vec<Bytes>> {
        let writer = self.writer.take().ok_or_else(closed)?;
        let bytes = writer.into_inner().map_err(std::io::Error::other)?;
        Ok(if bytes.is_empty() {
            Vec::new()
        } else {
            vec![Bytes::from(bytes)]
        })
    }
}

fn closed() -> std::io::Error {
    std::io::Error::other("the Parquet file is closed")
}
