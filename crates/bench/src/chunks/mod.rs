//! `devicecloud-bench chunks`: the bytes a stored point takes in a compressed chunk, and the
//! time to pack and unpack it, for pcodec (the store's codec, `store::chunks::codec`) against
//! Gorilla ([`gorilla`]), over chunk sizes and three kinds of series: the ingest benchmark's
//! rows, the demo's signals (the simulator's own models) and sensor readings as field devices
//! send them (quantised values, jittered timestamps, slow states). No server is started.

mod gorilla;

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Result, bail};
use devicecloud_protocol::ModuleKind;
use devicecloud_simulator::model::Model;
use devicecloud_store::chunks::codec::{self, Columns};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Options of `chunks`.
#[derive(Debug, clap::Args)]
pub struct ChunksOptions {
    /// Points of each series (at its own interval).
    #[arg(long, default_value_t = 86_400)]
    pub points: usize,
    /// Chunk sizes to compare, in points.
    #[arg(long, value_delimiter = ',', default_value = "100,1000,3600,10000,86400")]
    pub sizes: Vec<usize>,
}

/// A named set of series.
struct Dataset {
    name: &'static str,
    series: Vec<Columns>,
}

pub fn chunks(o: &ChunksOptions) -> Result<()> {
    let datasets = [ingest_rows(o.points), demo_signals(o.points), field_sensors(o.points)];
    println!(
        "bench chunks: {} points a series; bytes a point of the chunk alone (no row)",
        o.points
    );
    println!(
        "{:<10} {:>7} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10}",
        "series", "chunk", "pco B/pt", "gor B/pt", "pco pack", "pco read", "gor pack", "gor read"
    );
    for dataset in &datasets {
        for &size in &o.sizes {
            let row = measure(dataset, size)?;
            println!(
                "{:<10} {:>7} {:>9.3} {:>9.3} {:>10.1} {:>10.1} {:>10.1} {:>10.1}",
                dataset.name,
                size,
                row.pco_bytes,
                row.gorilla_bytes,
                row.pco_pack,
                row.pco_read,
                row.gorilla_pack,
                row.gorilla_read
            );
        }
    }
    println!("pack / read: million points a second, one core");
    Ok(())
}

/// One line of the table.
struct Row {
    pco_bytes: f64,
    gorilla_bytes: f64,
    pco_pack: f64,
    pco_read: f64,
    gorilla_pack: f64,
    gorilla_read: f64,
}

/// Packs every series of `dataset` in chunks of `size` points with both codecs, checks that
/// every chunk reads back to the bit, and measures.
fn measure(dataset: &Dataset, size: usize) -> Result<Row> {
    let pieces: Vec<Columns> = dataset
        .series
        .iter()
        .flat_map(|s| {
            (0..s.len()).step_by(size.max(1)).map(move |start| {
                let end = (start + size).min(s.len());
                Columns {
                    times_us: s.times_us[start..end].to_vec(),
                    values: s.values[start..end].to_vec(),
                    sessions: s.sessions[start..end].to_vec(),
                }
            })
        })
        .collect();
    let points: usize = pieces.iter().map(Columns::len).sum();
    let mega = |seconds: f64| points as f64 / seconds / 1e6;

    let started = Instant::now();
    let packed: Vec<Vec<u8>> = pieces.iter().map(codec::pack).collect::<Result<_, _>>()?;
    let pco_pack = mega(started.elapsed().as_secs_f64());
    let started = Instant::now();
    let read: Vec<Columns> = packed.iter().map(|p| codec::unpack(p)).collect::<Result<_, _>>()?;
    let pco_read = mega(started.elapsed().as_secs_f64());
    for (piece, back) in pieces.iter().zip(&read) {
        if !piece.bit_eq(back) {
            bail!("a pcodec chunk of {} did not read back to the bit", dataset.name);
        }
    }

    let started = Instant::now();
    let encoded: Vec<Vec<u8>> = pieces.iter().map(|p| gorilla::encode(&p.times_us, &p.values)).collect();
    let gorilla_pack = mega(started.elapsed().as_secs_f64());
    let started = Instant::now();
    let decoded: Vec<Option<(Vec<i64>, Vec<f64>)>> = encoded
        .iter()
        .zip(&pieces)
        .map(|(e, p)| gorilla::decode(e, p.len()))
        .collect();
    let gorilla_read = mega(started.elapsed().as_secs_f64());
    for (piece, back) in pieces.iter().zip(decoded) {
        let Some((times, values)) = back else {
            bail!("a Gorilla chunk of {} did not decode", dataset.name);
        };
        let back = Columns {
            times_us: times,
            values,
            sessions: piece.sessions.clone(),
        };
        if !piece.bit_eq(&back) {
            bail!("a Gorilla chunk of {} did not read back to the bit", dataset.name);
        }
    }
    // Gorilla has no sessions column: the same runs as pcodec's chunk are counted for it.
    let session_bytes: usize = pieces.iter().map(session_runs_bytes).sum();
    let bytes = |chunks: &[Vec<u8>]| chunks.iter().map(Vec::len).sum::<usize>() as f64;
    Ok(Row {
        pco_bytes: bytes(&packed) / points as f64,
        gorilla_bytes: (bytes(&encoded) + session_bytes as f64) / points as f64,
        pco_pack,
        pco_read,
        gorilla_pack,
        gorilla_read,
    })
}

/// What the session runs of a chunk take (two small varints a run).
fn session_runs_bytes(c: &Columns) -> usize {
    let mut runs = 0;
    let mut last = None;
    for (i, s) in c.sessions.iter().enumerate() {
        if i == 0 || Some(s) != last {
            runs += 1;
        }
        last = Some(s);
    }
    runs * 2
}

const START_S: i64 = 1_764_288_000;

/// The ingest benchmark's rows: one measurement a second, datatype `d` worth `t × 0.5 + d`.
fn ingest_rows(points: usize) -> Dataset {
    let series = (1..=10)
        .map(|d| {
            let seconds: Vec<i64> = (0..points as i64).map(|i| START_S + i).collect();
            Columns {
                times_us: seconds.iter().map(|s| s * 1_000_000).collect(),
                values: seconds.iter().map(|s| *s as f64 * 0.5 + f64::from(d)).collect(),
                sessions: vec![None; points],
            }
        })
        .collect();
    Dataset { name: "ingest", series }
}

/// The demo's signals: a simulated PLUS and GO module reading once a second, every series they
/// send (temperatures, voltage, flow, counters, registers, vibration), with their timestamps.
fn demo_signals(points: usize) -> Dataset {
    let mut series: BTreeMap<(String, u32), Columns> = BTreeMap::new();
    for (serial, kind, seed) in [("PLUS-1", ModuleKind::Plus, 7), ("GO-1", ModuleKind::Go, 11)] {
        let mut model = Model::new(serial, kind, true, seed, START_S as f64);
        let mut rng = StdRng::seed_from_u64(seed);
        for i in 0..points {
            // Sent on a one-second tick, a few milliseconds late as a real loop is.
            let now = (START_S + i as i64) as f64 + rng.random_range(0.0..0.005);
            for m in model.measurements(now) {
                let ts = m.ts.map_or(0, |t| t.seconds * 1_000_000 + i64::from(t.microseconds));
                let session = (kind == ModuleKind::Go).then_some(1);
                for (datatype, value) in m.values {
                    let key = (m.device.clone().unwrap_or_else(|| serial.to_string()), datatype);
                    let s = series.entry(key).or_default();
                    s.times_us.push(ts);
                    s.values.push(value);
                    s.sessions.push(session);
                }
            }
        }
    }
    Dataset {
        name: "demo",
        series: series.into_values().collect(),
    }
}

/// Field sensors every 10 s with ±50 ms of jitter: a temperature in 0.1 °C steps drifting
/// slowly, a relative humidity in whole percent, a door that opens now and then, and an energy
/// meter counting watt-hours.
fn field_sensors(points: usize) -> Dataset {
    let mut rng = StdRng::seed_from_u64(3);
    let times: Vec<i64> = (0..points as i64)
        .map(|i| (START_S + i * 10) * 1_000_000 + rng.random_range(-50_000..50_000))
        .collect();
    let mut temperature = 21.0f64;
    let mut humidity = 45.0f64;
    let mut door = 0.0;
    let mut energy = 120_000.0f64;
    let (mut t, mut h, mut d, mut e) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..points {
        temperature = (temperature + rng.random_range(-0.05..0.05f64)).clamp(15.0, 30.0);
        humidity = (humidity + rng.random_range(-0.3..0.3f64)).clamp(20.0, 80.0);
        if rng.random_range(0..200) == 0 {
            door = 1.0 - door;
        }
        energy += rng.random_range(0.0..3.0f64).round();
        t.push((temperature * 10.0).round() / 10.0);
        h.push(humidity.round());
        d.push(door);
        e.push(energy);
    }
    let series = [t, h, d, e]
        .into_iter()
        .map(|values| Columns {
            times_us: times.clone(),
            values,
            sessions: vec![None; points],
        })
        .collect();
    Dataset { name: "field", series }
}
