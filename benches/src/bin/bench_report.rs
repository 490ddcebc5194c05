//! Measures `handle_pool` against the alternatives and writes `BENCHES.md`
//! and an SVG chart.
//!
//! It writes the whole report, keeping nothing of the file it replaces:
//! measurements taken by hand go in `docs/perf/`, which the report points to.
//!
//! ```text
//! cargo run --release -p handle-pool-benches --bin bench_report [-- --quick] [--reps N]
//!     [--out BENCHES.md] [--chart benches/chart.svg] [--note "text"]
//!     [--only get_100k,get_1M,contains_100k,contains_1M,churn,churn_window64,mixed,insert,hot]
//!     [--threads 1,2,4,8]
//! ```
//!
//! Runs the workloads of `benches/workloads` (shared with `cargo bench`)
//! several times per cell, each run freshly set up, interleaving the pools so
//! that a burst of background load hits them all alike; reports the median and
//! the min–max range in million operations per second, the capacity after the
//! memory workloads, and the headline ratios against the targets (PASS/MISS),
//! all computed from medians of the same run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use plotters::prelude::*;
use sysinfo::{CpuRefreshKind, Pid, ProcessRefreshKind, ProcessesToUpdate, RefreshKind, System};

#[path = "../../workloads/mod.rs"]
mod workloads;

use workloads::adapters::{
    ConcurrentSlotMap, ConcurrentSlotMapGuard, HandlePoolCall, HandlePoolGuard, HandlePoolReader,
    ParkingLotMutexSlotMap, ShardedSlab, UnsyncSlotMap,
};
use workloads::{pool_table, Pool, PoolEntry, Sample, Scale, Workload, WINDOW};

// ---------------------------------------------------------------- options

struct Options {
    quick: bool,
    reps: usize,
    out: PathBuf,
    chart: PathBuf,
    note: Option<String>,
    only: Option<Vec<String>>,
    threads: Option<Vec<usize>>,
    command: String,
}

impl Options {
    fn parse() -> Options {
        let root = repo_root();
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut options = Options {
            quick: false,
            reps: 0,
            out: root.join("BENCHES.md"),
            chart: root.join("benches").join("chart.svg"),
            note: None,
            only: None,
            threads: None,
            command: if args.is_empty() {
                "cargo run --release -p handle-pool-benches --bin bench_report".to_string()
            } else {
                format!(
                    "cargo run --release -p handle-pool-benches --bin bench_report -- {}",
                    args.iter()
                        .map(|a| shell_quote(a))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            },
        };
        let default_out = options.out.clone();
        if let Err(error) = options.read(args) {
            usage(&error.to_string());
        }
        // A report written elsewhere (a trial run) takes its chart along,
        // so it never overwrites the repository's.
        if options.out != default_out && options.chart == root.join("benches").join("chart.svg") {
            options.chart = options.out.with_extension("svg");
        }
        if options.reps == 0 {
            options.reps = if options.quick { 3 } else { 5 };
        }
        options
    }

    /// Reads the command line `args` (without the program name) into `self`.
    fn read(&mut self, args: Vec<String>) -> Result<(), lexopt::Error> {
        use lexopt::prelude::*;

        let mut parser = lexopt::Parser::from_args(args);
        while let Some(arg) = parser.next()? {
            match arg {
                Long("quick") => self.quick = true,
                Long("reps") => self.reps = parser.value()?.parse()?,
                Long("out") => self.out = parser.value()?.into(),
                Long("chart") => self.chart = parser.value()?.into(),
                Long("note") => self.note = Some(parser.value()?.string()?),
                Long("only") => {
                    let list = parser.value()?.string()?;
                    self.only = Some(list.split(',').map(str::to_string).collect());
                }
                Long("threads") => {
                    self.threads = Some(
                        parser
                            .value()?
                            .parse_with(|list| list.split(',').map(str::parse).collect())?,
                    )
                }
                Short('h') | Long("help") => usage(""),
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(())
    }
}

/// The repository's root (this tool's package is its `benches/` directory),
/// so the report lands in the same place whatever the working directory.
fn repo_root() -> PathBuf {
    let benches = Path::new(env!("CARGO_MANIFEST_DIR"));
    benches.parent().unwrap_or(benches).to_path_buf()
}

const USAGE: &str = "\
usage: cargo run --release -p handle-pool-benches --bin bench_report -- [--quick] [--reps N]
           [--out BENCHES.md] [--chart benches/chart.svg] [--note TEXT]
           [--only get_100k,churn,...] [--threads 1,2,...] [--help]

  --quick         smaller runs, without get_1M and contains_1M; 3 repetitions unless --reps
  --reps N        repetitions per cell (default 5, or 3 with --quick)
  --out PATH      the report to write (default BENCHES.md at the repository root),
                  replaced whole
  --chart PATH    the SVG chart to write (default benches/chart.svg, or next to
                  --out, named after it, when --out is given)
  --note TEXT     a note line for the report
  --only LIST     workloads to run, comma-separated: get_100k, get_1M,
                  contains_100k, contains_1M, churn, churn_window64, mixed,
                  insert, hot
  --threads LIST  thread counts, comma-separated (default 1,2,4,8)
  -h, --help      print this message";

/// Prints the usage, on stdout for `--help` (empty `error`, exit 0), on
/// stderr after the error otherwise (exit 2).
fn usage(error: &str) -> ! {
    if error.is_empty() {
        println!("{USAGE}");
        std::process::exit(0)
    }
    eprintln!("bench_report: {error}\n\n{USAGE}");
    std::process::exit(2)
}

fn shell_quote(arg: &str) -> String {
    if arg
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./=:".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// What to measure.
struct Plan {
    workloads: Vec<Workload>,
    threads: Vec<usize>,
    scale: Scale,
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                workloads: vec![
                    Workload::Get(100_000),
                    Workload::Contains(100_000),
                    Workload::Churn,
                    Workload::ChurnWindow64,
                    Workload::Mixed,
                    Workload::Insert,
                    Workload::Hot,
                ],
                threads: vec![1, 2, 4, 8],
                scale: Scale::QUICK,
            }
        } else {
            Plan {
                workloads: vec![
                    Workload::Get(100_000),
                    Workload::Get(1_000_000),
                    Workload::Contains(100_000),
                    Workload::Contains(1_000_000),
                    Workload::Churn,
                    Workload::ChurnWindow64,
                    Workload::Mixed,
                    Workload::Insert,
                    Workload::Hot,
                ],
                threads: vec![1, 2, 4, 8],
                scale: Scale::FULL,
            }
        }
    }
}

// ---------------------------------------------------------------- results

/// The samples of one (workload, pool, thread count) cell.
#[derive(Default)]
struct Cell {
    samples: Vec<Sample>,
}

impl Cell {
    fn mops(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.samples.iter().map(Sample::mops).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    fn median(&self) -> f64 {
        median(&self.mops())
    }

    fn range(&self) -> (f64, f64) {
        let v = self.mops();
        (v[0], v[v.len() - 1])
    }

    fn capacities(&self) -> Option<Vec<usize>> {
        let mut v: Vec<usize> = self.samples.iter().filter_map(|s| s.capacity).collect();
        v.sort_unstable();
        (!v.is_empty()).then_some(v)
    }

    fn peak_live(&self) -> Option<u64> {
        self.samples.iter().filter_map(|s| s.peak_live).max()
    }
}

fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

struct Results {
    plan: Plan,
    pools: Vec<PoolEntry>,
    cells: BTreeMap<(usize, usize, usize), Cell>,
}

impl Results {
    fn cell(&self, workload: Workload, pool: &str, threads: usize) -> Option<&Cell> {
        let w = self.plan.workloads.iter().position(|&x| x == workload)?;
        let p = self.pools.iter().position(|e| e.name == pool)?;
        self.cells
            .get(&(w, p, threads))
            .filter(|c| !c.samples.is_empty())
    }

    fn median(&self, workload: Workload, pool: &str, threads: usize) -> Option<f64> {
        self.cell(workload, pool, threads).map(Cell::median)
    }
}

fn measure(plan: Plan, reps: usize) -> Results {
    let pools = pool_table();
    let mut cells: BTreeMap<(usize, usize, usize), Cell> = BTreeMap::new();
    for (w, &workload) in plan.workloads.iter().enumerate() {
        for &threads in &plan.threads {
            let started = Instant::now();
            for rep in 0..reps {
                // Rotate the order every repetition.
                for k in 0..pools.len() {
                    let p = (k + rep) % pools.len();
                    let pool = &pools[p];
                    if pool.single_thread && threads > 1 {
                        continue;
                    }
                    let sample = (pool.run)(workload, threads, plan.scale);
                    cells
                        .entry((w, p, threads))
                        .or_default()
                        .samples
                        .push(sample);
                }
            }
            let line: Vec<String> = pools
                .iter()
                .enumerate()
                .filter_map(|(p, e)| {
                    let cell = cells.get(&(w, p, threads))?;
                    Some(format!("{} {:.1}", short(e.name), cell.median()))
                })
                .collect();
            println!(
                "{:>15} {threads}t ({:.1}s): {}",
                workload.id(),
                started.elapsed().as_secs_f64(),
                line.join(", ")
            );
        }
    }
    Results { plan, pools, cells }
}

/// A short label for progress lines.
fn short(name: &str) -> String {
    name.split(" (")
        .next()
        .unwrap_or(name)
        .chars()
        .take(22)
        .collect::<String>()
        + if name.contains("guard held") {
            "+g"
        } else if name.contains("(reader)") {
            "+r"
        } else {
            ""
        }
}

// ---------------------------------------------------------------- targets

struct Check {
    target: String,
    detail: String,
    ratio: Option<f64>,
    required: f64,
    /// `true`: ratio must be >= required; `false`: a value must be <= required.
    at_least: bool,
}

impl Check {
    fn verdict(&self) -> &'static str {
        match self.ratio {
            None => "n/a",
            Some(r)
                if (self.at_least && r >= self.required)
                    || (!self.at_least && r <= self.required) =>
            {
                "PASS"
            }
            Some(_) => "MISS",
        }
    }

    fn measured(&self) -> String {
        match self.ratio {
            None => "not measured".to_string(),
            // A miss that two decimals would round onto its target is cut
            // to three, not rounded, so it never reads as the target.
            Some(r) if self.at_least && r < self.required && r >= self.required - 0.005 => {
                format!("{:.3}x", (r * 1000.0).floor() / 1000.0)
            }
            Some(r) if self.at_least => format!("{r:.2}x"),
            Some(r) => format!("{r:.0}"),
        }
    }

    fn required(&self) -> String {
        if self.at_least {
            format!(">= {:.2}x", self.required)
        } else {
            format!("<= {:.0}", self.required)
        }
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?)
}

fn checks(r: &Results) -> Vec<Check> {
    let call = HandlePoolCall::NAME;
    let guard = HandlePoolGuard::NAME;
    let reader = HandlePoolReader::NAME;
    let pl = ParkingLotMutexSlotMap::NAME;
    let cs = ConcurrentSlotMap::NAME;
    let cs_guard = ConcurrentSlotMapGuard::NAME;
    let slab = ShardedSlab::NAME;
    let unsync = UnsyncSlotMap::NAME;
    let mut out = Vec::new();
    let mut check = |target: String, detail: String, ratio: Option<f64>, required: f64| {
        out.push(Check {
            target,
            detail,
            ratio,
            required,
            at_least: true,
        })
    };
    let m = |w, p, t| r.median(w, p, t);

    let lookups: Vec<Workload> = r
        .plan
        .workloads
        .iter()
        .copied()
        .filter(|w| matches!(w, Workload::Get(_) | Workload::Contains(_)))
        .collect();
    for &lookup in &lookups {
        let id = lookup.id();
        // The issue's two held-guard targets, for `get` and for `contains`
        // (the guard-held row's `contains` needs no guard), with a guard
        // held and through a reader, whose lookups read the storage as of
        // its last re-pin.
        for hp in [guard, reader] {
            let held = variant(hp);
            check(
                format!("{id}: {held}, 1 thread vs unsynchronised SlotMap"),
                format!("{hp} 1t / {unsync} 1t"),
                ratio(m(lookup, hp, 1), m(lookup, unsync, 1)),
                0.8,
            );
            check(
                format!("{id}: {held}, 1 thread vs concurrent-slotmap guard held"),
                format!("{hp} 1t / {cs_guard} 1t"),
                ratio(m(lookup, hp, 1), m(lookup, cs_guard, 1)),
                1.3,
            );
        }
        if matches!(lookup, Workload::Contains(_)) {
            continue;
        }
        let get = lookup;
        check(
            format!("{id}: guard held, 2 threads vs its own 1 thread"),
            format!("{guard} 2t / 1t"),
            ratio(m(get, guard, 2), m(get, guard, 1)),
            1.7,
        );
        check(
            format!("{id}: one-call, 1 thread vs parking_lot Mutex<SlotMap>"),
            format!("{call} 1t / {pl} 1t"),
            ratio(m(get, call, 1), m(get, pl, 1)),
            1.0,
        );
        check(
            format!("{id}: one-call, 2 threads vs parking_lot Mutex<SlotMap>"),
            format!("{call} 2t / {pl} 2t"),
            ratio(m(get, call, 2), m(get, pl, 2)),
            2.0,
        );
        for &t in &r.plan.threads {
            check(
                format!("{id}: one-call, {} vs concurrent-slotmap", thread_label(t)),
                format!("{call} {t}t / {cs} {t}t"),
                ratio(m(get, call, t), m(get, cs, t)),
                1.1,
            );
        }
    }
    let churn = Workload::Churn;
    check(
        "churn: 1 thread vs parking_lot Mutex<SlotMap>".into(),
        format!("{call} 1t / {pl} 1t"),
        ratio(m(churn, call, 1), m(churn, pl, 1)),
        1.5,
    );
    for t in [2, 8] {
        check(
            format!("churn: {t} threads vs sharded-slab"),
            format!("{call} {t}t / {slab} {t}t"),
            ratio(m(churn, call, t), m(churn, slab, t)),
            1.2,
        );
    }
    check(
        "churn: 8 threads vs its own 2 threads".into(),
        format!("{call} 8t / 2t"),
        ratio(m(churn, call, 8), m(churn, call, 2)),
        0.9,
    );
    for t in [2, 4, 8] {
        for hp in [call, guard, reader] {
            let best = r
                .pools
                .iter()
                .filter(|e| !e.is_handle_pool)
                .filter_map(|e| Some((e.name, m(Workload::Mixed, e.name, t)?)))
                .max_by(|a, b| a.1.total_cmp(&b.1));
            let (best_name, best_value) = match best {
                Some((n, v)) => (n, Some(v)),
                None => ("—", None),
            };
            // "Ahead" means strictly faster; 1.00x exactly would be a tie.
            check(
                format!("mixed: {t} threads, {} vs every competitor", variant(hp)),
                format!("{hp} {t}t / best competitor ({best_name}) {t}t"),
                ratio(m(Workload::Mixed, hp, t), best_value),
                1.0,
            );
        }
    }
    for hp in [call, guard, reader] {
        let cell = r.cell(Workload::ChurnWindow64, hp, 8);
        let peak = cell
            .and_then(Cell::peak_live)
            .unwrap_or(8 * (WINDOW as u64 + 1));
        let bound = 4 * peak + 1024;
        let worst = cell
            .and_then(Cell::capacities)
            .map(|c| c[c.len() - 1] as f64);
        out.push(Check {
            target: format!(
                "churn_window64: capacity at 8 threads, {} (worst of the repetitions)",
                variant(hp)
            ),
            detail: format!("capacity <= 4 x peak live ({peak}) + 1024"),
            ratio: worst,
            required: bound as f64,
            at_least: false,
        });
    }
    out
}

fn variant(name: &str) -> &'static str {
    if name.contains("guard held") {
        "guard held"
    } else if name.contains("(reader)") {
        "reader"
    } else {
        "one-call"
    }
}

// ---------------------------------------------------------------- machine

/// The CPU's brand string (`model name` in `/proc/cpuinfo` on Linux).
fn cpu_model(machine: &System) -> String {
    machine
        .cpus()
        .first()
        .map(|cpu| cpu.brand().trim().to_string())
        .filter(|brand| !brand.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The machine's logical CPUs (those `/proc/stat` counts on Linux), whatever
/// this process may use of them.
fn logical_cpus(machine: &System) -> usize {
    machine.cpus().len().max(1)
}

/// The logical CPUs this process may run on (`nproc`: affinity and cgroup
/// quota applied). sysinfo has no such figure.
fn available_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The commit the pool was built from, and whether `src/` differs from it.
fn source_revision() -> String {
    let root = repo_root();
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&[
                "status",
                "--porcelain",
                "--",
                "src",
                "Cargo.toml",
                "benches",
            ])
            .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("commit `{commit}` **with uncommitted changes**")
            } else {
                format!("commit `{commit}`")
            }
        }
        None => "unknown (not a git checkout)".into(),
    }
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` prints them.
fn loadavg() -> String {
    if !sysinfo::IS_SUPPORTED_SYSTEM {
        return "n/a".into();
    }
    let load = System::load_average();
    format!("{:.2} {:.2} {:.2}", load.one, load.five, load.fifteen)
}

/// Measures the share of the machine's CPU time that other processes used
/// between [`CpuMeter::start`] and [`CpuMeter::finish`]: the machine's busy
/// share (sysinfo's global CPU usage between two refreshes, from `/proc/stat`
/// on Linux: all but idle and iowait over all, as the hand-read ticks were;
/// sysinfo also adds guest time, which Linux already counts in user time, so
/// a machine running virtual machines would read a little busier) less this
/// process's own CPU time over the same interval's capacity (wall time times
/// logical CPUs).
struct CpuMeter {
    machine: System,
    process: System,
    pid: Pid,
    own_ms: u64,
    started: Instant,
}

impl CpuMeter {
    fn start(machine: System) -> Option<CpuMeter> {
        if !sysinfo::IS_SUPPORTED_SYSTEM {
            return None;
        }
        let pid = sysinfo::get_current_pid().ok()?;
        let mut meter = CpuMeter {
            machine,
            process: System::new(),
            pid,
            own_ms: 0,
            started: Instant::now(),
        };
        meter.own_ms = meter.own_cpu_ms()?;
        meter.machine.refresh_cpu_usage();
        meter.started = Instant::now();
        Some(meter)
    }

    /// This process's CPU time so far, user and system, in milliseconds.
    fn own_cpu_ms(&mut self) -> Option<u64> {
        self.process.refresh_processes_specifics(
            ProcessesToUpdate::Some(&[self.pid]),
            false,
            ProcessRefreshKind::nothing().with_cpu(),
        );
        Some(self.process.process(self.pid)?.accumulated_cpu_time())
    }

    /// The other processes' share of the machine's CPU time since `start`,
    /// in `0..=1`.
    fn finish(mut self) -> Option<f64> {
        self.machine.refresh_cpu_usage();
        let elapsed = self.started.elapsed().as_secs_f64();
        let own_ms = self.own_cpu_ms()?;
        let busy = f64::from(self.machine.global_cpu_usage()) / 100.0;
        let capacity = elapsed * logical_cpus(&self.machine) as f64;
        if capacity <= 0.0 {
            return None;
        }
        let mine = own_ms.saturating_sub(self.own_ms) as f64 / 1000.0 / capacity;
        Some((busy - mine).clamp(0.0, 1.0))
    }
}

/// `YYYY-MM-DD HH:MM UTC` from the system clock.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days to civil date (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}

// ---------------------------------------------------------------- markdown

fn thread_label(t: usize) -> String {
    if t == 1 {
        "1 thread".into()
    } else {
        format!("{t} threads")
    }
}

fn capacity_text(cell: &Cell) -> String {
    let caps = match cell.capacities() {
        Some(c) => c,
        None => return "n/a".into(),
    };
    let med = caps[caps.len() / 2];
    let max = caps[caps.len() - 1];
    let live = cell
        .peak_live()
        .map_or_else(|| "n/a".to_string(), |p| p.to_string());
    if med == max {
        format!("{med} / {live}")
    } else {
        format!("{med} (max {max}) / {live}")
    }
}

struct RunInfo {
    revision: String,
    date: String,
    seconds: f64,
    load_before: String,
    load_after: String,
    other_cpu: Option<f64>,
    /// The machine's logical CPUs, those this process may use, and the CPU's brand.
    cpus: usize,
    available_cpus: usize,
    cpu_model: String,
}

fn markdown(r: &Results, o: &Options, info: &RunInfo, checks: &[Check]) -> String {
    let mut s = String::new();
    let threads = &r.plan.threads;
    let _ = writeln!(s, "# Benchmarks\n");
    let _ = writeln!(
        s,
        "Generated by `benches/src/bin/bench_report.rs`; the workloads and adapters are \
         `benches/workloads/`, shared with the criterion bench \
         (`cargo bench -p handle-pool-benches`).\n"
    );
    let perf = relative_to(
        &repo_root().join("docs").join("perf").join("README.md"),
        o.out.parent().unwrap_or(Path::new(".")),
    );
    let _ = writeln!(
        s,
        "Regenerate it with `cargo run --release -p handle-pool-benches --bin bench_report` \
         (`-- --help` lists the options); the tool rewrites this whole file. Measurements \
         taken by hand, each with its commands and what was kept, are the numbered notes \
         in [docs/perf/]({perf}).\n"
    );
    let _ = writeln!(s, "- Command: `{}`", o.command);
    let _ = writeln!(s, "- Source: {}", info.revision);
    let _ = writeln!(
        s,
        "- Machine: {} logical CPUs{}, {}",
        info.cpus,
        if info.available_cpus < info.cpus {
            format!(" ({} available to this process)", info.available_cpus)
        } else {
            String::new()
        },
        info.cpu_model
    );
    let _ = writeln!(
        s,
        "- Date: {}; the run took {:.0} s",
        info.date, info.seconds
    );
    let _ = writeln!(
        s,
        "- Load average (1/5/15 min) before: {}, after: {}",
        info.load_before, info.load_after
    );
    if let Some(other) = info.other_cpu {
        let cores = other * info.cpus as f64;
        let _ = writeln!(
            s,
            "- CPU time used by other processes during the run: {:.0}% of the machine, \
             about {:.1} of its {} cores{}",
            other * 100.0,
            cores,
            info.cpus,
            if other > 0.05 {
                " (**the machine was shared while these figures were taken**)"
            } else {
                ""
            }
        );
        let free = info
            .cpus
            .saturating_sub(cores.round() as usize)
            .min(info.available_cpus);
        if free < 2 {
            let _ = writeln!(
                s,
                "  - With that load, fewer than 2 cores were free on average: figures at \
                 2 or more threads cannot show parallel scaling, and the scaling ratios \
                 below measure the sharing as much as the pools."
            );
        }
    }
    if let Some(note) = &o.note {
        let _ = writeln!(s, "- Note: {note}");
    }
    let _ = writeln!(
        s,
        "- {} repetitions per cell, each freshly set up, pools interleaved; \
         figures are million operations per second, **median** [min–max].",
        o.reps
    );
    let _ = writeln!(
        s,
        "- Work per run, split evenly over the threads: {} lookups (get, contains, hot), {} \
         insert+remove pairs (churn, churn_window64), {} operations (mixed), {} inserts (insert).",
        r.plan.scale.get_ops,
        r.plan.scale.churn_pairs,
        r.plan.scale.mixed_ops,
        r.plan.scale.insert_total
    );
    let _ = writeln!(
        s,
        "- Time of a run: the parallel section, from the first thread leaving the start \
         barrier to the last thread finishing. Threads beyond 2 are oversubscribed on \
         this machine: they show preemption behaviour, not scaling."
    );
    let _ = writeln!(
        s,
        "- Value type: `u64` for every pool. `handle_pool (one-call)` uses `get_cloned` \
         (pins per call); `(guard held)` pins once and re-pins every {} operations; \
         `(reader)` looks up through a `Reader` re-pinned as often (inserts and removes \
         go to the pool); concurrent-slotmap likewise pins per call or holds a guard. The unsynchronised \
         `SlotMap` runs on one thread only: the no-synchronisation limit.\n",
        workloads::adapters::REPIN_EVERY
    );
    let chart = relative_to(&o.chart, o.out.parent().unwrap_or(Path::new(".")));
    let _ = writeln!(s, "![throughput against thread count]({chart})\n");

    let _ = writeln!(s, "## Headline ratios\n");
    let _ = writeln!(
        s,
        "From the medians in the tables below, same run. MISS means the target was not met here.\n"
    );
    let _ = writeln!(s, "| target | compared | measured | required | verdict |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for c in checks {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | **{}** |",
            md(&c.target),
            md(&c.detail),
            c.measured(),
            c.required(),
            c.verdict()
        );
    }
    let _ = writeln!(s);

    for (w, &workload) in r.plan.workloads.iter().enumerate() {
        let _ = writeln!(s, "## {}\n", workload.id());
        let _ = writeln!(
            s,
            "{}. Unit: million {} per second.\n",
            capitalise(&workload.describe()),
            workload.unit()
        );
        let _ = write!(s, "| pool |");
        for &t in threads {
            let _ = write!(s, " {} |", thread_label(t));
        }
        let _ = writeln!(s);
        let _ = writeln!(s, "|---|{}", "---:|".repeat(threads.len()));
        for (p, pool) in r.pools.iter().enumerate() {
            let _ = write!(s, "| {} |", md(pool.name));
            for &t in threads {
                match r.cells.get(&(w, p, t)).filter(|c| !c.samples.is_empty()) {
                    Some(cell) => {
                        let (lo, hi) = cell.range();
                        let _ = write!(s, " {:.1} [{:.1}–{:.1}] |", cell.median(), lo, hi);
                    }
                    None => {
                        let _ = write!(s, " – |");
                    }
                }
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(s);
        if workload.records_memory() {
            let _ = writeln!(
                s,
                "Capacity at the end of a run (median, and max if larger) / peak live \
                 count{}. Capacity is slots allocated (handle_pool, SlotMap), committed slots \
                 (concurrent-slotmap), or the map's capacity (DashMap); sharded-slab exposes none.\n",
                if workload == Workload::Mixed {
                    " (an upper bound: prefill plus, per thread, its largest excess of inserts \
                     over successful removes)"
                } else {
                    ""
                }
            );
            let _ = write!(s, "| pool |");
            for &t in threads {
                let _ = write!(s, " {} |", thread_label(t));
            }
            let _ = writeln!(s);
            let _ = writeln!(s, "|---|{}", "---:|".repeat(threads.len()));
            for (p, pool) in r.pools.iter().enumerate() {
                let _ = write!(s, "| {} |", md(pool.name));
                for &t in threads {
                    match r.cells.get(&(w, p, t)).filter(|c| !c.samples.is_empty()) {
                        Some(cell) => {
                            let _ = write!(s, " {} |", capacity_text(cell));
                        }
                        None => {
                            let _ = write!(s, " – |");
                        }
                    }
                }
                let _ = writeln!(s);
            }
            let _ = writeln!(s);
        }
    }
    s
}

/// Escapes `<` and `>` so pool names like `Mutex<SlotMap>` survive Markdown.
fn md(s: &str) -> String {
    s.replace('<', "&lt;").replace('>', "&gt;")
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// `path` relative to `base` when it is inside it, else `path` itself.
fn relative_to(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (path_abs, base_abs) = (abs(path), abs(base));
    path_abs
        .strip_prefix(&base_abs)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| path.display().to_string())
}

// ---------------------------------------------------------------- chart

const COLOURS: [RGBColor; 11] = [
    RGBColor(214, 39, 40),   // handle_pool one-call: red
    RGBColor(148, 0, 60),    // handle_pool guard held: dark red
    RGBColor(255, 105, 180), // handle_pool reader: pink
    RGBColor(31, 119, 180),  // std Mutex
    RGBColor(23, 190, 207),  // parking_lot Mutex
    RGBColor(44, 160, 44),   // parking_lot RwLock
    RGBColor(255, 127, 14),  // sharded-slab
    RGBColor(148, 103, 189), // concurrent-slotmap
    RGBColor(188, 128, 189), // concurrent-slotmap guard held
    RGBColor(140, 86, 75),   // DashMap
    RGBColor(0, 0, 0),       // unsynchronised SlotMap
];

/// 1, 2, 5 × 10^k between `lo` and `hi`.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let mut ticks = Vec::new();
    let mut decade = 10f64.powi(lo.log10().floor() as i32);
    while decade <= hi {
        for m in [1.0, 2.0, 5.0] {
            let t = m * decade;
            if (lo..=hi).contains(&t) {
                ticks.push(t);
            }
        }
        decade *= 10.0;
    }
    ticks
}

fn chart(r: &Results, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let panels = r.plan.workloads.len() + 1; // + legend
    let cols = 2;
    let rows = panels.div_ceil(cols);
    let root = SVGBackend::new(path, (1100, 380 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((rows, cols));
    let threads = &r.plan.threads;
    let x_of = |t: usize| t as f64;
    let x_min = x_of(*threads.iter().min().unwrap_or(&1));
    let x_max = x_of(*threads.iter().max().unwrap_or(&1));
    for (w, &workload) in r.plan.workloads.iter().enumerate() {
        let area = &areas[w];
        let medians: Vec<f64> = r
            .cells
            .iter()
            .filter(|((cw, _, _), c)| *cw == w && !c.samples.is_empty())
            .map(|(_, c)| c.median())
            .collect();
        // A log scale: the unsynchronised baseline is often 10x the rest.
        let y_max = medians.iter().copied().fold(1.0f64, f64::max) * 1.3;
        let y_min = medians.iter().copied().fold(y_max, f64::min).max(0.01) * 0.7;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{} (M {}/s)", workload.id(), workload.unit()),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(
                (x_min * 0.8..x_max * 1.25)
                    .log_scale()
                    .base(2.0)
                    .with_key_points(threads.iter().map(|&t| x_of(t)).collect()),
                (y_min..y_max)
                    .log_scale()
                    .with_key_points(log_ticks(y_min, y_max)),
            )?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .y_label_formatter(&|y| {
                if *y >= 10.0 {
                    format!("{y:.0}")
                } else {
                    format!("{y:.1}")
                }
            })
            .x_desc("threads")
            .y_desc("Mops/s (median, log scale)")
            .draw()?;
        for (p, _) in r.pools.iter().enumerate() {
            let colour = COLOURS[p % COLOURS.len()];
            let points: Vec<(f64, f64)> = threads
                .iter()
                .filter_map(|&t| {
                    let cell = r.cells.get(&(w, p, t))?;
                    (!cell.samples.is_empty()).then(|| (x_of(t), cell.median()))
                })
                .collect();
            let style = ShapeStyle::from(&colour).stroke_width(2);
            chart.draw_series(LineSeries::new(points.clone(), style))?;
            chart.draw_series(
                points
                    .iter()
                    .map(|&pt| Circle::new(pt, 3, ShapeStyle::from(&colour).filled())),
            )?;
        }
    }
    // Legend panel.
    let legend = &areas[r.plan.workloads.len()];
    for (p, pool) in r.pools.iter().enumerate() {
        let colour = COLOURS[p % COLOURS.len()];
        let y = 30 + 28 * p as i32;
        legend.draw(&PathElement::new(
            vec![(30, y), (70, y)],
            ShapeStyle::from(&colour).stroke_width(3),
        ))?;
        legend.draw(&Circle::new((50, y), 4, ShapeStyle::from(&colour).filled()))?;
        legend.draw(&Text::new(
            pool.name.to_string(),
            (80, y - 8),
            ("sans-serif", 16).into_font(),
        ))?;
    }
    root.present()?;
    Ok(())
}

// ---------------------------------------------------------------- main

fn main() {
    let options = Options::parse();
    let mut plan = Plan::new(options.quick);
    if let Some(only) = &options.only {
        plan.workloads.retain(|w| only.contains(&w.id()));
        if plan.workloads.is_empty() {
            usage("--only matched no workload");
        }
    }
    if let Some(threads) = &options.threads {
        plan.threads.clone_from(threads);
    }
    println!(
        "bench_report: {} workloads x {} thread counts x {} pools x {} repetitions{}",
        plan.workloads.len(),
        plan.threads.len(),
        pool_table().len(),
        options.reps,
        if options.quick { " (quick)" } else { "" }
    );
    let date = utc_now();
    let load_before = loadavg();
    let machine = System::new_with_specifics(
        RefreshKind::nothing().with_cpu(CpuRefreshKind::nothing().with_cpu_usage()),
    );
    let cpus = logical_cpus(&machine);
    let cpu_model = cpu_model(&machine);
    let cpu_meter = CpuMeter::start(machine);
    let started = Instant::now();

    let results = measure(plan, options.reps);

    let seconds = started.elapsed().as_secs_f64();
    let other_cpu = cpu_meter.and_then(CpuMeter::finish);
    let info = RunInfo {
        revision: source_revision(),
        date,
        seconds,
        load_before,
        load_after: loadavg(),
        other_cpu,
        cpus,
        available_cpus: available_cpus(),
        cpu_model,
    };
    let checks = checks(&results);

    println!("\nheadline ratios (medians of this run):");
    for c in &checks {
        println!(
            "  {:4}  {:<72} {:>12} (required {})",
            c.verdict(),
            c.target,
            c.measured(),
            c.required()
        );
    }

    if let Some(dir) = options.chart.parent() {
        std::fs::create_dir_all(dir).expect("create the chart's directory");
    }
    match chart(&results, &options.chart) {
        Ok(()) => println!("\nwrote {}", options.chart.display()),
        Err(e) => eprintln!("\nchart failed: {e}"),
    }
    let md = markdown(&results, &options, &info, &checks);
    std::fs::write(&options.out, md).expect("write the report");
    println!("wrote {}", options.out.display());
    if let Some(other) = info.other_cpu {
        println!(
            "other processes used {:.0}% of the machine's CPU time during the run ({:.0} s)",
            other * 100.0,
            seconds
        );
    }
}
