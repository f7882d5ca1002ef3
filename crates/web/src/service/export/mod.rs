//! The streamed export (`GET /api/v2/data/export`, docs/api.md, "Export"): every raw point the
//! caller may read that matches the filters of `data`, oldest first, as CSV or Parquet, in one
//! answer written while it is read.
//!
//! The points come from the store a batch at a time; each batch is encoded on the blocking
//! pool (so a large export does not hold an async worker) and sent through a short channel, so
//! the server holds a few batches at most however large the export, and stops reading as soon
//! as the client goes away (the channel's receiver is dropped with the connection).

mod csv;
mod parquet;

use bytes::Bytes;
use devicecloud_query::{Filter, Params};
use devicecloud_store::chunks::Point;
use devicecloud_store::export as store;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::ReceiverStream;

use super::{FieldError, Result, ServiceError};
use crate::caller::Caller;
use crate::state::AppState;

/// Points read and encoded at a time: a few megabytes of points, CSV text or a Parquet row
/// group (docs/api.md, "Export", gives the memory this bounds).
const BATCH_POINTS: usize = 32_768;

/// Encoded pieces in flight to the client.
const PIECES_IN_FLIGHT: usize = 4;

/// What the export is written as (`format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Csv,
    Parquet,
}

impl Format {
    /// The `format` parameter of the query string: `csv` (the default when it is absent) or
    /// `parquet`; anything else, the empty string included, is refused as the schema's enum says.
    pub fn of_query(query: &[u8]) -> Result<Format> {
        match Params::parse_query(query).get_scalar("format") {
            None | Some("csv") => Ok(Format::Csv),
            Some("parquet") => Ok(Format::Parquet),
            Some(_) => Err(ServiceError::Invalid(vec![FieldError::new(
                "format",
                "Format must be \"csv\" or \"parquet\".",
            )])),
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=UTF-8",
            Format::Parquet => "application/vnd.apache.parquet",
        }
    }

    pub fn extension(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Parquet => "parquet",
        }
    }
}

/// An export under way: its format and its bytes, as they are encoded.
pub struct ExportBody {
    pub format: Format,
    pub bytes: ReceiverStream<std::io::Result<Bytes>>,
}

/// Encodes batches of points in one format.
trait Encoder: Send + 'static {
    /// What comes before the first point (CSV's header; Parquet's magic).
    fn start(&mut self) -> std::io::Result<Vec<Bytes>>;
    /// A batch of points (of the series the encoder was made for).
    fn batch(&mut self, points: &[Point]) -> std::io::Result<Vec<Bytes>>;
    /// What comes after the last point (Parquet's footer).
    fn finish(self: Box<Self>) -> std::io::Result<Vec<Bytes>>;
}

/// The export of the points the caller sees that match `filter` (which names the group). A
/// store error before the first byte is the answer's error; after it, the transfer breaks off,
/// so that the client sees a failed download rather than a short file.
pub async fn export(state: &AppState, caller: &Caller, filter: Option<&Filter>, format: Format) -> Result<ExportBody> {
    let mut export = store::open(&state.db, &caller.group_scope(), filter, BATCH_POINTS).await?;
    let mut encoder: Box<dyn Encoder> = match format {
        Format::Csv => Box::new(csv::Csv::new(export.series())),
        Format::Parquet => {
            Box::new(parquet::Parquet::new(export.series()).map_err(|e| ServiceError::Internal(e.to_string()))?)
        }
    };
    let (tx, rx) = mpsc::channel::<std::io::Result<Bytes>>(PIECES_IN_FLIGHT);
    tokio::spawn(async move {
        let _running = Running::start();
        let started = encoder.start();
        if !send_all(&tx, started).await {
            return;
        }
        // The next batch is read while the one before is encoded: on two cores the store's
        // reading and the encoding overlap.
        let mut state = Encoding::Idle(encoder);
        loop {
            let next = export.next_batch().await;
            let mut encoder = match state {
                Encoding::Idle(encoder) => encoder,
                Encoding::Busy(handle) => {
                    let Ok((encoder, pieces)) = handle.await else { return };
                    if !send_all(&tx, pieces).await {
                        return;
                    }
                    encoder
                }
            };
            match next {
                Ok(Some(points)) => {
                    metrics::counter!("devicecloud_export_points_total").increment(points.len() as u64);
                    state = Encoding::Busy(tokio::task::spawn_blocking(move || {
                        let pieces = encoder.batch(&points);
                        (encoder, pieces)
                    }));
                }
                Ok(None) => {
                    let _ = send_all(&tx, encoder.finish()).await;
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "export failed");
                    let _ = tx.send(Err(std::io::Error::other("store error"))).await;
                    return;
                }
            }
        }
    });
    Ok(ExportBody {
        format,
        bytes: ReceiverStream::new(rx),
    })
}

/// An encoder handed back with the pieces of its batch.
type Encoded = (Box<dyn Encoder>, std::io::Result<Vec<Bytes>>);

/// The encoder, free or encoding a batch on the blocking pool.
enum Encoding {
    Idle(Box<dyn Encoder>),
    Busy(JoinHandle<Encoded>),
}

/// The `devicecloud_exports_running` gauge while an export is read: down again when the
/// export ends, fails or its client goes away.
struct Running;

impl Running {
    fn start() -> Running {
        metrics::gauge!("devicecloud_exports_running").increment(1.0);
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        metrics::gauge!("devicecloud_exports_running").decrement(1.0);
    }
}

/// Sends encoded pieces (or the error that stopped them) in order; false when the client has
/// gone or the encoding failed.
async fn send_all(tx: &mpsc::Sender<std::io::Result<Bytes>>, pieces: std::io::Result<Vec<Bytes>>) -> bool {
    match pieces {
        Ok(pieces) => {
            for piece in pieces {
                if tx.send(Ok(piece)).await.is_err() {
                    return false;
                }
            }
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "export encoding failed");
            let _ = tx.send(Err(e)).await;
            false
        }
    }
}
