//! Charts as inline SVG, drawn on the server: the average as a line over a min–max band, a
//! UTC time axis, and a break wherever data is missing (a gap is never bridged by a line).
//!
//! Hand-written rather than through a plotting crate: the picture is a few paths, and writing
//! them keeps a year of daily buckets well under a millisecond and the markup styleable. Points
//! come merged per pixel column ([`COLUMNS`]) from the store, or at most 500 per series for a
//! data session, so every point given is drawn.

use maud::{Markup, html};
use time::OffsetDateTime;
use time::macros::format_description;

use crate::format;

/// One point of a series: a bucket (or a raw point, where min = max = avg).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub t: f64,
    pub min: f64,
    pub max: f64,
    pub avg: f64,
}

/// What a chart shows and over which time span.
pub struct Chart<'a> {
    pub title: &'a str,
    pub unit: Option<&'a str>,
    pub from: f64,
    pub to: f64,
    /// The bucket width in seconds; `None` for raw points, whose spacing is learnt from the data.
    pub step: Option<f64>,
    pub points: &'a [Point],
}

const W: f64 = 640.0;
const H: f64 = 220.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 14.0;
/// The plot's width in pixel columns: more points than this cannot be told apart.
pub const COLUMNS: i64 = (W - LEFT - RIGHT) as i64;
const TOP: f64 = 26.0;
const BOTTOM: f64 = 26.0;

/// Splits points (ascending time) into runs without gaps. A gap is a distance of more than 1.5
/// times the usual one: the bucket width, or the series' median spacing where that is wider
/// (a device that reports every 5 minutes fills one minute bucket in five, and that is its
/// rhythm, not missing data; learnt from five points or more). Raw points, whose spacing
/// jitters, allow 3 times their median.
pub fn segments(points: &[Point], step: Option<f64>) -> Vec<&[Point]> {
    if points.is_empty() {
        return Vec::new();
    }
    let mut gaps: Vec<f64> = points.windows(2).map(|w| w[1].t - w[0].t).collect();
    gaps.sort_by(f64::total_cmp);
    let median = gaps.get(gaps.len() / 2).copied();
    let limit = match step {
        // A rhythm needs a few spacings to be one: below that, the bucket width decides.
        Some(step) if gaps.len() < 4 => step * 1.5,
        Some(step) => step.max(median.unwrap_or(step)) * 1.5,
        None => median.unwrap_or(1.0).max(1e-6) * 3.0,
    };
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..points.len() {
        if points[i].t - points[i - 1].t > limit {
            out.push(&points[start..i]);
            start = i;
        }
    }
    out.push(&points[start..]);
    out
}

/// Round tick values covering [lo, hi], about five of them.
fn value_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo) / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(magnitude * 10.0);
    let mut v = (lo / step).ceil() * step;
    let mut ticks = Vec::new();
    while v <= hi + step * 1e-9 && ticks.len() < 20 {
        ticks.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    ticks
}

/// UTC-aligned time ticks and their labels: months for long spans, else whole multiples of a
/// round step.
fn time_ticks(from: f64, to: f64) -> Vec<(f64, String)> {
    let span = to - from;
    if span > 60.0 * 86_400.0 {
        let mut ticks = Vec::new();
        let Ok(start) = OffsetDateTime::from_unix_timestamp(from as i64) else {
            return ticks;
        };
        let (mut year, mut month) = (start.year(), u8::from(start.month()));
        loop {
            month += 1;
            if month > 12 {
                month = 1;
                year += 1;
            }
            let Ok(m) = time::Month::try_from(month) else { break };
            let Ok(date) = time::Date::from_calendar_date(year, m, 1) else {
                break;
            };
            let t = date.midnight().assume_utc().unix_timestamp() as f64;
            if t > to || ticks.len() > 24 {
                break;
            }
            let label = if month == 1 {
                format!("{year}")
            } else {
                format!("{year}-{month:02}")
            };
            ticks.push((t, label));
        }
        // Twelve monthly labels crowd 640 px: keep every other one on a year.
        if ticks.len() > 8 {
            ticks = ticks.into_iter().step_by(2).collect();
        }
        return ticks;
    }
    const STEPS: [f64; 12] = [
        60.0, 300.0, 600.0, 900.0, 1800.0, 3600.0, 10_800.0, 21_600.0, 43_200.0, 86_400.0, 172_800.0, 604_800.0,
    ];
    let step = STEPS.into_iter().find(|s| span / s <= 8.0).unwrap_or(604_800.0);
    let mut t = (from / step).ceil() * step;
    let mut ticks = Vec::new();
    while t <= to && ticks.len() < 12 {
        let at = OffsetDateTime::from_unix_timestamp(t as i64).unwrap_or(OffsetDateTime::UNIX_EPOCH);
        let midnight = at.hour() == 0 && at.minute() == 0;
        let label = if step >= 86_400.0 || midnight {
            at.format(format_description!("[month]-[day]"))
        } else {
            at.format(format_description!("[hour]:[minute]"))
        };
        ticks.push((t, label.unwrap_or_default()));
        t += step;
    }
    ticks
}

/// The chart as an inline `<svg>`.
pub fn render(chart: &Chart) -> Markup {
    let title = match chart.unit.filter(|u| !u.is_empty()) {
        Some(unit) => format!("{} ({unit})", chart.title),
        None => chart.title.to_string(),
    };
    let (plot_w, plot_h) = (W - LEFT - RIGHT, H - TOP - BOTTOM);
    let span = (chart.to - chart.from).max(1.0);
    let x = |t: f64| LEFT + (t - chart.from) / span * plot_w;
    // A value that is not a number cannot be drawn (and would break the path).
    let finite: Vec<Point> = chart
        .points
        .iter()
        .copied()
        .filter(|p| p.t.is_finite() && p.min.is_finite() && p.max.is_finite() && p.avg.is_finite())
        .collect();
    let (mut lo, mut hi) = finite.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
        (lo.min(p.min), hi.max(p.max))
    });
    if !lo.is_finite() || !hi.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    // A flat series gets a band around it, wide enough to survive rounding at any magnitude.
    let flat = (hi - lo) <= f64::EPSILON * hi.abs().max(lo.abs()).max(1.0) * 16.0;
    if flat {
        let margin = (hi.abs() * 1e-6).max(1.0);
        (lo, hi) = (lo - margin, hi + margin);
    }
    let pad = (hi - lo) * 0.05;
    let (lo, hi) = (lo - pad, hi + pad);
    let y = |v: f64| TOP + (hi - v) / (hi - lo) * plot_h;
    // A gap narrower than a pixel column cannot be seen; points already merged per column
    // (one a column) must not read as gaps.
    let step = chart.step.map(|s| s.max(span / plot_w));
    let runs = segments(&finite, step);
    let mut bands = String::new();
    let mut lines = String::new();
    let mut dots = Vec::new();
    for run in &runs {
        if run.len() == 1 {
            dots.push((x(run[0].t), y(run[0].avg)));
            continue;
        }
        for (i, p) in run.iter().enumerate() {
            let cmd = if i == 0 { 'M' } else { 'L' };
            lines.push_str(&format!("{cmd}{:.1},{:.1}", x(p.t), y(p.avg)));
            bands.push_str(&format!("{cmd}{:.1},{:.1}", x(p.t), y(p.max)));
        }
        for p in run.iter().rev() {
            bands.push_str(&format!("L{:.1},{:.1}", x(p.t), y(p.min)));
        }
        bands.push('Z');
    }
    let view_box = format!("0 0 {W} {H}");
    html! {
        svg.chart viewBox=(view_box) role="img" aria-label=(title) xmlns="http://www.w3.org/2000/svg" {
            text.title x=(LEFT) y="16" { (title) }
            text x=(W - RIGHT) y="16" text-anchor="end" { "UTC" }
            @for v in value_ticks(lo, hi) {
                line.gridline x1=(LEFT) x2=(W - RIGHT) y1=(format!("{:.1}", y(v))) y2=(format!("{:.1}", y(v))) {}
                text x=(LEFT - 6.0) y=(format!("{:.1}", y(v) + 4.0)) text-anchor="end" { (format::number(v)) }
            }
            @for (t, label) in time_ticks(chart.from, chart.to) {
                line.axis x1=(format!("{:.1}", x(t))) x2=(format!("{:.1}", x(t))) y1=(H - BOTTOM) y2=(H - BOTTOM + 4.0) {}
                text x=(format!("{:.1}", x(t))) y=(H - 8.0) text-anchor="middle" { (label) }
            }
            line.axis x1=(LEFT) x2=(W - RIGHT) y1=(H - BOTTOM) y2=(H - BOTTOM) {}
            line.axis x1=(LEFT) x2=(LEFT) y1=(TOP) y2=(H - BOTTOM) {}
            @if finite.is_empty() {
                text x=(LEFT + plot_w / 2.0) y=(TOP + plot_h / 2.0) text-anchor="middle" { "No data in this range" }
            }
            @if !bands.is_empty() { path.band d=(bands) {} }
            @if !lines.is_empty() { path.line d=(lines) {} }
            @for (cx, cy) in dots {
                circle.dot cx=(format!("{cx:.1}")) cy=(format!("{cy:.1}")) r="2.5" {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: f64, v: f64) -> Point {
        Point {
            t,
            min: v - 1.0,
            max: v + 1.0,
            avg: v,
        }
    }

    #[test]
    fn gaps_split_the_line() {
        let points = [p(0.0, 1.0), p(60.0, 2.0), p(120.0, 3.0), p(600.0, 4.0), p(660.0, 5.0)];
        let runs = segments(&points, Some(60.0));
        assert_eq!(runs.iter().map(|r| r.len()).collect::<Vec<_>>(), vec![3, 2]);
        // One value every 5 minutes in minute buckets is the series' rhythm, not five gaps; an
        // hour without data is a gap.
        let sparse: Vec<Point> = [0.0, 300.0, 600.0, 900.0, 4500.0, 4800.0]
            .iter()
            .map(|t| p(*t, 0.0))
            .collect();
        assert_eq!(
            segments(&sparse, Some(60.0))
                .iter()
                .map(|r| r.len())
                .collect::<Vec<_>>(),
            vec![4, 2]
        );
        // Raw points: the spacing is learnt (median 1 s), a 10 s hole is a gap.
        let raw: Vec<Point> = [0.0, 1.0, 2.0, 3.0, 13.0, 14.0].iter().map(|t| p(*t, 0.0)).collect();
        assert_eq!(segments(&raw, None).len(), 2);
        assert!(segments(&[], None).is_empty());
    }

    #[test]
    fn a_gap_has_no_line_across_it() {
        let points = [p(0.0, 1.0), p(60.0, 2.0), p(600.0, 4.0), p(660.0, 5.0)];
        let svg = render(&Chart {
            title: "Flow",
            unit: Some("m3/h"),
            from: 0.0,
            to: 720.0,
            step: Some(60.0),
            points: &points,
        })
        .into_string();
        assert!(svg.contains("Flow (m3/h)"));
        let line = svg
            .split("class=\"line\" d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert_eq!(line.matches('M').count(), 2, "{line}");
        assert!(svg.contains("class=\"band\""));
    }

    #[test]
    fn flat_huge_and_non_finite_values_draw_without_nan() {
        let nan = Point {
            t: 120.0,
            min: f64::NAN,
            max: f64::NAN,
            avg: f64::NAN,
        };
        let points = [p(0.0, 1e17), p(60.0, 1e17), nan];
        let chart = Chart {
            title: "T",
            unit: None,
            from: 0.0,
            to: 180.0,
            step: Some(60.0),
            points: &points,
        };
        let svg = render(&chart).into_string();
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        assert!(svg.contains("class=\"line\""));
    }

    #[test]
    fn ticks_are_round_and_utc_aligned() {
        assert_eq!(value_ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let day = time_ticks(1_763_683_200.0, 1_763_683_200.0 + 86_400.0);
        assert!(day.iter().all(|(t, _)| (*t as i64) % 10_800 == 0), "{day:?}");
        assert_eq!(day[0].1, "11-21");
        let year = time_ticks(1_735_689_600.0 - 86_400.0 * 10.0, 1_735_689_600.0 + 300.0 * 86_400.0);
        assert_eq!(year[0].1, "2025");
        let empty = render(&Chart {
            title: "T",
            unit: None,
            from: 0.0,
            to: 3600.0,
            step: None,
            points: &[],
        })
        .into_string();
        assert!(empty.contains("No data in this range"));
    }
}
