//! `ccload top`: a full-screen live view of congestion control (ratatui):
//! the busiest flows from the telemetry ring with sparklines of cwnd, srtt
//! and rate for the selected one, per-algorithm/profile totals from the
//! in-kernel aggregates, and the ring-drop counter.  Keys: s sort (cwnd,
//! rate, srtt, flow), f freeze, up/down select, q or Esc quit.

use std::collections::{BTreeMap, VecDeque};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use libbpf_rs::RingBufferBuilder;
use ratatui::crossterm::event::{self, Event as TermEvent, KeyCode, KeyEventKind};
use ratatui::crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::crossterm::ExecutableCommand;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table};

use crate::bpf::algos::Algo;
use crate::bpf::telemetry::Event;
use crate::{bpf, intf};

/// Samples of history kept per flow for the sparklines.
const HISTORY: usize = 120;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SortBy {
    Cwnd,
    Rate,
    Srtt,
    Flow,
}

impl SortBy {
    fn next(self) -> SortBy {
        match self {
            SortBy::Cwnd => SortBy::Rate,
            SortBy::Rate => SortBy::Srtt,
            SortBy::Srtt => SortBy::Flow,
            SortBy::Flow => SortBy::Cwnd,
        }
    }
    fn name(self) -> &'static str {
        match self {
            SortBy::Cwnd => "cwnd",
            SortBy::Rate => "rate",
            SortBy::Srtt => "srtt",
            SortBy::Flow => "flow",
        }
    }
}

/// The window's rate in Mbit/s: cwnd * mss / srtt.
fn rate_mbps(e: &Event) -> f64 {
    if e.hdr.srtt_us == 0 {
        0.0
    } else {
        e.hdr.snd_cwnd as f64 * e.hdr.mss as f64 * 8.0 / e.hdr.srtt_us as f64
    }
}

struct Flow {
    last: Event,
    seen: Instant,
    cwnd: VecDeque<u64>,
    srtt: VecDeque<u64>,
    rate: VecDeque<u64>,
}

impl Flow {
    fn push(&mut self, e: Event) {
        for (q, v) in [
            (&mut self.cwnd, e.hdr.snd_cwnd as u64),
            (&mut self.srtt, e.hdr.srtt_us as u64),
            (&mut self.rate, rate_mbps(&e) as u64),
        ] {
            if q.len() == HISTORY {
                q.pop_front();
            }
            q.push_back(v);
        }
        self.last = e;
        self.seen = Instant::now();
    }
}

/// What the screen shows; updated from records unless frozen.
struct View {
    flows: BTreeMap<(u32, String, String), Flow>,
    sort: SortBy,
    frozen: bool,
    selected: usize,
    records: u64,
}

impl View {
    fn add(&mut self, e: Event) {
        self.records += 1;
        if self.frozen {
            return;
        }
        let key = (e.algo.id(), e.local().to_string(), e.remote().to_string());
        match self.flows.get_mut(&key) {
            Some(f) => f.push(e),
            None => {
                let mut f = Flow {
                    last: e.clone(),
                    seen: Instant::now(),
                    cwnd: VecDeque::new(),
                    srtt: VecDeque::new(),
                    rate: VecDeque::new(),
                };
                f.push(e);
                self.flows.insert(key, f);
            }
        }
    }

    /// Flows seen in the last 10 s, in the chosen order.
    fn rows(&mut self) -> Vec<&Flow> {
        if !self.frozen {
            self.flows
                .retain(|_, f| f.seen.elapsed() < Duration::from_secs(10));
        }
        let mut v: Vec<&Flow> = self.flows.values().collect();
        match self.sort {
            SortBy::Cwnd => v.sort_by_key(|f| std::cmp::Reverse(f.last.hdr.snd_cwnd)),
            SortBy::Srtt => v.sort_by_key(|f| std::cmp::Reverse(f.last.hdr.srtt_us)),
            SortBy::Rate => v.sort_by(|a, b| rate_mbps(&b.last).total_cmp(&rate_mbps(&a.last))),
            SortBy::Flow => {}
        }
        v
    }
}

/// Restores the terminal however `top` ends.
struct TermGuard;
impl Drop for TermGuard {
    fn drop(&mut self) {
        let _ = disable_raw_mode();
        let _ = std::io::stdout().execute(LeaveAlternateScreen);
    }
}

fn drops(algos: &[Algo]) -> u64 {
    algos
        .iter()
        .filter_map(|a| bpf::read_stats(*a).ok())
        .map(|s| s[intf::CCL_STAT_RB_RESERVE_FAIL as usize])
        .sum()
}

fn totals(algos: &[Algo]) -> Vec<Row<'static>> {
    let mut rows = Vec::new();
    for a in algos {
        let Ok(slots) = crate::bind::agg::read_algo(*a) else {
            continue;
        };
        for (p, g) in slots.iter().enumerate() {
            if g.get("flows_started") == 0 {
                continue;
            }
            let s = g.summary();
            let f = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or("-".into());
            rows.push(Row::new(vec![
                format!("{a}/{p}"),
                s.flows_started.saturating_sub(s.flows_ended).to_string(),
                s.flows_started.to_string(),
                s.retrans_ratio
                    .map(|r| format!("{:.3}", r * 100.0))
                    .unwrap_or("-".into()),
                s.loss_events.to_string(),
                s.rtos.to_string(),
                f(s.srtt_ms_p50, 2),
                f(s.srtt_ms_p95, 2),
                f(s.rate_mbps_p50, 1),
            ]));
        }
    }
    rows
}

pub fn run(algos: Vec<Algo>) -> Result<()> {
    if !std::io::stdout().is_terminal() {
        bail!("ccload top needs a terminal (for a pipe or a file: ccload watch --format json)");
    }
    bpf::require_root()?;
    if algos.is_empty() {
        bail!("nothing is attached (ccload attach --algo ALGO first)");
    }
    let mut locks = Vec::new();
    let mut maps = Vec::new();
    for a in &algos {
        locks.push(crate::bpf::stream::lock_consumer(*a).context(
            "top reads the ring buffer itself; stop the other consumer (or `ccload serve`) first",
        )?);
        maps.push(bpf::open_map(*a, "events")?);
    }
    let queue = std::rc::Rc::new(std::cell::RefCell::new(Vec::<Event>::new()));
    let mut b = RingBufferBuilder::new();
    for m in &maps {
        let q = queue.clone();
        b.add(m, move |d: &[u8]| {
            if let Some(e) = Event::decode(d) {
                q.borrow_mut().push(e);
            }
            0
        })?;
    }
    let rb = b.build()?;
    let drops0 = drops(&algos);

    enable_raw_mode()?;
    std::io::stdout().execute(EnterAlternateScreen)?;
    let _guard = TermGuard;
    let mut term =
        ratatui::Terminal::new(ratatui::backend::CrosstermBackend::new(std::io::stdout()))?;
    let mut view = View {
        flows: BTreeMap::new(),
        sort: SortBy::Cwnd,
        frozen: false,
        selected: 0,
        records: 0,
    };
    let mut agg_rows = totals(&algos);
    let mut agg_at = Instant::now();
    loop {
        // Drain the ring until a pass finds nothing (see watch.rs), then
        // wait for keys for up to 200 ms.
        while rb.consume_raw() > 0 {}
        for e in queue.borrow_mut().drain(..) {
            view.add(e);
        }
        if agg_at.elapsed() >= Duration::from_secs(1) {
            agg_rows = totals(&algos);
            agg_at = Instant::now();
        }
        let dropped = drops(&algos).saturating_sub(drops0);
        let (sort, frozen, records) = (view.sort, view.frozen, view.records);
        let sel = view.selected;
        let rows = view.rows();
        let n = rows.len();
        let selected = sel.min(n.saturating_sub(1));
        term.draw(|f| {
            draw(
                f,
                &Header {
                    n,
                    records,
                    dropped,
                    sort,
                    frozen,
                },
                &agg_rows,
                &rows,
                selected,
            )
        })?;
        if event::poll(Duration::from_millis(200))? {
            if let TermEvent::Key(k) = event::read()? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => break,
                    KeyCode::Char('s') => view.sort = view.sort.next(),
                    KeyCode::Char('f') => view.frozen = !view.frozen,
                    KeyCode::Down => view.selected = (selected + 1).min(n.saturating_sub(1)),
                    KeyCode::Up => view.selected = selected.saturating_sub(1),
                    _ => {}
                }
            }
        }
    }
    drop(locks);
    Ok(())
}

/// The header line's counts and modes.
struct Header {
    n: usize,
    records: u64,
    dropped: u64,
    sort: SortBy,
    frozen: bool,
}

/// One frame: the header, the in-kernel aggregates, the flows (the
/// `selected` one highlighted) and its sparklines.
fn draw(
    f: &mut ratatui::Frame,
    h: &Header,
    agg_rows: &[Row<'static>],
    rows: &[&Flow],
    selected: usize,
) {
    let [head, tot, list, spark] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(agg_rows.len() as u16 + 3),
        Constraint::Min(5),
        Constraint::Length(9),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(Line::from(format!(
            "ccload-top  {} flows  {} records  ring drops {}  sort:{}{}   [s]ort [f]reeze [up/down] select [q]uit",
            h.n,
            h.records,
            h.dropped,
            h.sort.name(),
            if h.frozen { "  FROZEN" } else { "" }
        ))),
        head,
    );
    f.render_widget(aggregates_table(agg_rows), tot);
    f.render_widget(flows_table(rows, selected), list);
    if let Some(fl) = rows.get(selected) {
        let [a, b2, c] = Layout::vertical([Constraint::Length(3); 3]).areas(spark);
        for (area, title, data) in [
            (a, "cwnd (segments)", &fl.cwnd),
            (b2, "srtt (us)", &fl.srtt),
            (c, "rate (Mbit/s)", &fl.rate),
        ] {
            let d: Vec<u64> = data.iter().copied().collect();
            f.render_widget(
                Sparkline::default()
                    .block(
                        Block::default()
                            .borders(Borders::ALL)
                            .title(format!("{title}: {}", d.last().copied().unwrap_or(0))),
                    )
                    .data(&d),
                area,
            );
        }
    }
}

/// The in-kernel aggregates, a row per algorithm and profile.
fn aggregates_table(agg_rows: &[Row<'static>]) -> Table<'static> {
    Table::new(
        agg_rows.to_vec(),
        [
            Constraint::Length(14),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(9),
            Constraint::Length(9),
            Constraint::Length(10),
        ],
    )
    .header(
        Row::new(vec![
            "algo/profile",
            "open",
            "flows",
            "retx %",
            "losses",
            "RTOs",
            "srtt p50",
            "srtt p95",
            "rate p50",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title("in-kernel aggregates (ms, Mbit/s)"),
    )
}

/// The flows, the `selected` one highlighted.
fn flows_table<'a>(rows: &[&'a Flow], selected: usize) -> Table<'a> {
    let body: Vec<Row> = rows
        .iter()
        .enumerate()
        .map(|(i, fl)| {
            let e = &fl.last;
            let r = Row::new(vec![
                format!("{} > {}", e.local(), e.remote()),
                e.algo.name().to_string(),
                e.phase_name().to_string(),
                e.hdr.ca_state.to_string(),
                e.hdr.snd_cwnd.to_string(),
                format!("{:.2}", e.hdr.srtt_us as f64 / 1000.0),
                format!("{:.1}", rate_mbps(e)),
            ]);
            if i == selected {
                r.style(Style::default().add_modifier(Modifier::REVERSED))
            } else {
                r
            }
        })
        .collect();
    Table::new(
        body,
        [
            Constraint::Length(46),
            Constraint::Length(10),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(10),
        ],
    )
    .header(
        Row::new(vec![
            "flow (local > remote)",
            "algo",
            "phase",
            "state",
            "cwnd",
            "srtt ms",
            "rate Mb/s",
        ])
        .style(Style::default().add_modifier(Modifier::BOLD)),
    )
    .block(Block::default().borders(Borders::ALL).title("flows"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bpf::telemetry::tests::sample_record;

    #[test]
    fn sort_cycles_and_freeze_stops_updates() {
        assert_eq!(SortBy::Cwnd.next().next().next().next(), SortBy::Cwnd);
        let mut v = View {
            flows: BTreeMap::new(),
            sort: SortBy::Cwnd,
            frozen: false,
            selected: 0,
            records: 0,
        };
        let e = Event::decode(&sample_record(Algo::Ccpd, 0)).unwrap();
        v.add(e.clone());
        v.add(e.clone());
        assert_eq!(v.rows().len(), 1);
        assert_eq!(v.flows.values().next().unwrap().cwnd.len(), 2);
        v.frozen = true;
        v.add(e);
        assert_eq!(v.records, 3, "records are counted while frozen");
        assert_eq!(
            v.flows.values().next().unwrap().cwnd.len(),
            2,
            "but not shown"
        );
        // 20 segments of 0 bytes (the sample has mss 0) at 10 ms: rate 0.
        assert_eq!(rate_mbps(&v.flows.values().next().unwrap().last), 0.0);
    }
}
