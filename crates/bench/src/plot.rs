//! The SVG plot of a [`Report`]: lag over time (scatter with the p99 line) above the lag
//! histogram. Drawn with plotters' SVG backend, whose text is plain `<text>` elements, so no font
//! or system library is needed.

use std::path::Path;

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::analyze::Report;

/// Plot size in pixels.
const SIZE: (u32, u32) = (1100, 900);
const FONT: &str = "sans-serif";

/// Why a plot could not be written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// Drawing or writing the SVG failed.
    #[error("cannot draw plot {path}: {message}")]
    Draw {
        /// The file being written.
        path: String,
        /// What plotters reported.
        message: String,
    },
}

/// Write `report` as one SVG at `path`: (a) lag over time with the p99 line, (b) lag histogram.
pub fn write_plot(report: &Report, path: &Path) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError::Draw {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let body = root
        .titled("precise-ttl benchmark: deletion lag", (FONT, 26))
        .map_err(|e| err(&e))?;
    let (upper, lower) = body.split_vertically(SIZE.1 / 2 - 20);
    draw_scatter(report, &upper).map_err(|e| err(&e))?;
    draw_histogram(report, &lower).map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

type DrawResult = Result<(), DrawingAreaErrorKind<std::io::Error>>;

/// The colour of the deletions, in both panels.
const DELETION_BLUE: RGBColor = RGBColor(31, 119, 180);

/// One panel's chart on `area`: both panels have the same caption font, margin and room for
/// the axis labels.
fn panel<'a, 'b>(
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: String,
    x: std::ops::Range<f64>,
    y: std::ops::Range<f64>,
) -> Result<
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    DrawingAreaErrorKind<std::io::Error>,
> {
    ChartBuilder::on(area)
        .caption(caption, (FONT, 18))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
}

/// A panel's axes: their descriptions, in the plot's fonts, with its tick labels.
fn axes<'m, 'a, 'b, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB>,
    x_desc: &str,
    y_desc: &str,
) -> &'m mut MeshStyle<'a, 'b, RangedCoordf64, RangedCoordf64, DB> {
    mesh.x_desc(x_desc)
        .y_desc(y_desc)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .x_label_formatter(&tick)
        .y_label_formatter(&tick)
}

/// Panel (a): one point per removed `Expire` item, early deletions in red, p99 as a line.
fn draw_scatter(report: &Report, area: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
    let points = &report.lag_points;
    let x_max = points
        .iter()
        .map(|p| p.t_s)
        .fold(report.run.duration_s, f64::max)
        .max(1.0);
    let x_min = points.iter().map(|p| p.t_s).fold(0.0, f64::min);
    let y_max = points.iter().map(|p| p.lag_ms).max().unwrap_or(0).max(1) as f64;
    let y_min = points.iter().map(|p| p.lag_ms).min().unwrap_or(0).min(0) as f64;
    let pad = (y_max - y_min) * 0.05;

    let caption = match &report.lag {
        Some(l) => format!(
            "(a) lag over time — {} items, p50 {} ms, p99 {} ms, max {} ms",
            l.count, l.p50_ms, l.p99_ms, l.max_ms
        ),
        None => "(a) lag over time — no expiring item deleted".to_owned(),
    };
    let mut chart = panel(area, caption, x_min..x_max, (y_min - pad)..(y_max + pad))?;
    let mut mesh = chart.configure_mesh();
    axes(
        &mut mesh,
        "seconds since sweeper start",
        "lag (ms) = seen − TTL",
    )
    .draw()?;

    let blue = DELETION_BLUE;
    chart
        .draw_series(
            points
                .iter()
                .filter(|p| p.lag_ms >= 0)
                .map(|p| Circle::new((p.t_s, p.lag_ms as f64), 2, blue.mix(0.6).filled())),
        )?
        .label("deletion")
        .legend(move |(x, y)| Circle::new((x + 10, y), 3, blue.filled()));
    if points.iter().any(|p| p.lag_ms < 0) {
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.lag_ms < 0)
                    .map(|p| Cross::new((p.t_s, p.lag_ms as f64), 4, RED.stroke_width(2))),
            )?
            .label("deleted before TTL")
            .legend(|(x, y)| Cross::new((x + 10, y), 4, RED.stroke_width(2)));
    }
    if let Some(l) = &report.lag {
        let p99 = l.p99_ms as f64;
        let orange = RGBColor(255, 127, 14);
        chart
            .draw_series(LineSeries::new(
                [(x_min, p99), (x_max, p99)],
                orange.stroke_width(2),
            ))?
            .label(format!("p99 = {} ms", l.p99_ms))
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], orange.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// Panel (b): bars of the lag histogram; the overflow bucket (lags above the regular range) is
/// drawn one bucket width past the end, in another colour.
fn draw_histogram(report: &Report, area: &DrawingArea<SVGBackend<'_>, Shift>) -> DrawResult {
    let buckets = &report.lag_histogram;
    let regular: Vec<_> = buckets.iter().filter(|b| !b.overflow).collect();
    let overflow = buckets.iter().find(|b| b.overflow);
    let width = regular.first().map_or(1, |b| b.hi_ms - b.lo_ms + 1) as f64;
    let regular_end = regular.last().map_or(1, |b| b.hi_ms + 1) as f64;
    let x_end = if overflow.is_some() {
        regular_end + width
    } else {
        regular_end
    };
    let y_max = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1) as f64 * 1.1;

    let caption = match overflow {
        Some(o) => format!(
            "(b) lag histogram — {} ms buckets; {} items above {} ms (max {} ms) in the last bar",
            width, o.count, o.lo_ms, o.hi_ms
        ),
        None => format!("(b) lag histogram — {width} ms buckets"),
    };
    let mut chart = panel(area, caption, 0.0..x_end, 0.0..y_max)?;
    let mut mesh = chart.configure_mesh();
    axes(&mut mesh, "lag (ms), clamped at 0", "items")
        .disable_x_mesh()
        .draw()?;

    let blue = DELETION_BLUE;
    // A small gap keeps neighbouring bars of equal height apart.
    let gap = width * 0.08;
    chart.draw_series(regular.iter().filter(|b| b.count > 0).map(|b| {
        Rectangle::new(
            [
                (b.lo_ms as f64 + gap, 0.0),
                ((b.hi_ms + 1) as f64 - gap, b.count as f64),
            ],
            blue.mix(0.8).filled(),
        )
    }))?;
    if let Some(o) = overflow {
        chart.draw_series(std::iter::once(Rectangle::new(
            [(regular_end + gap, 0.0), (x_end - gap, o.count as f64)],
            RED.mix(0.7).filled(),
        )))?;
    }
    Ok(())
}

/// An axis tick: at most 3 decimals, no trailing `.0`.
fn tick(v: &f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    // `-0` would print as "-0".
    format!("{}", if r == 0.0 { 0.0 } else { r })
}
