//! The `evolve` strategy: islands with migration and a MAP-Elites archive per island, in the
//! style of OpenEvolve, on the same round budget as the others. No planner and no tree.
//!
//! - **Islands** take turns round-robin: round `r` works on island `(r - 1) mod n`. With
//!   `parallel` = p > 1, up to p rounds are out at once, each on a different island (so at most
//!   `islands` at once): a new round goes to the next island in round-robin order that has no
//!   round out. Islands do not wait for each other; which island gets a round depends only on
//!   the order in which earlier rounds finished, which the event log records.
//! - **Archive**: each island keeps a grid over two descriptors computed from a candidate's
//!   sources alone ([`descriptors`]: source size and loop count); a cell holds the best candidate
//!   that landed in it. A newcomer takes an occupied cell only when it beats the incumbent by
//!   more than the measured noise ([`beats`]). Failed children never enter an archive.
//! - **Parent sampling**: the island's elites ranked by speedup (ties: older first); the i-th of
//!   k (0-based) has weight k - i, so the best cell is the likeliest and every cell can be drawn.
//! - **Inspirations**: the best other elite of the island, plus one other drawn uniformly from
//!   the rest (so 0-2, depending on how many elites the island has).
//! - An island whose archive is empty (no passing seed, nothing passed there yet) writes a kernel
//!   from the seed or the specification, or fixes its latest failure, as `refine` does.
//! - **Migration**: after every `migration_interval`-th round to finish, the best elite of each
//!   island (as it stood before this migration) is offered to the next island's archive (a
//!   ring), under the same cell rule. (One at a time, the k-th round to finish is round k.) The candidate is shared, not copied: no new candidate, no evaluation.
//! - **Randomness**: a splitmix64 PRNG seeded from `rng_seed`, advanced only by the sampling
//!   done while applying an event, so a replay draws the same numbers.

use super::budget::ResumeAt;
use super::candidates::{measurement_lines, Candidate};
use super::compare::{beats_by, rank_key, CompareRule};
use super::protocol::{CodeKind, EngineConfig, Source};
use super::refine::{self, Tried};
use super::render::{describe, files, performance, task_json};
use super::{prompts, Engine, EngineError};
use serde::Serialize;
use serde_json::json;

/// The MAP-Elites descriptors of a kernel, from its sources alone, each a bin in
/// `0..grid[i]`:
/// 0. **size**: non-blank lines over all files, on a log2 scale: `floor(log2(lines / 16))`
///    (with 4 bins: < 32, 32-63, 64-127, >= 128 lines);
/// 1. **loops**: `for` and `while` keywords outside `//` and `/* */` comments, on a log2 scale:
///    `floor(log2(loops + 1))` (with 4 bins: 0, 1-2, 3-6, >= 7 loops).
///
/// Size separates a compact kernel from one with specialised paths; loops separate a plain
/// loop nest from an unrolled or split one of the same length.
pub fn descriptors(sources: &[Source], grid: [u32; 2]) -> [u32; 2] {
    let lines: u32 = sources
        .iter()
        .map(|s| s.content.lines().filter(|l| !l.trim().is_empty()).count() as u32)
        .sum();
    let loops: u32 = sources
        .iter()
        .map(|s| {
            strip_comments(&s.content)
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|t| *t == "for" || *t == "while")
                .count() as u32
        })
        .sum();
    let size = (lines / 16).max(1).ilog2();
    let loops = loops.saturating_add(1).ilog2();
    [size.min(grid[0].max(1) - 1), loops.min(grid[1].max(1) - 1)]
}

/// The text without `//` line comments and `/* */` block comments.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map(|n| &rest[l + n..]).unwrap_or("");
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                rest = rest[b + 2..].find("*/").map(|n| &rest[b + 2 + n + 2..]).unwrap_or("");
            }
            _ => {
                out.push_str(rest);
                rest = "";
            }
        }
    }
    out
}

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and good enough for sampling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`), by multiply-shift.
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// One occupied cell of an island's archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Elite {
    /// `[size bin, loop bin]` (see [`descriptors`]).
    pub cell: [u32; 2],
    /// The candidate holding the cell: the best of those that fell into it.
    pub candidate: i64,
}

/// One island of `evolve`: an archive of elites that evolves apart, but for migrations.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Island {
    /// The occupied cells, ordered by cell.
    pub archive: Vec<Elite>,
    /// Candidates born on this island (whatever became of them), in order.
    pub children: Vec<i64>,
    /// The latest round's outcome on this island.
    #[serde(skip)]
    last: Option<Tried>,
}

impl Island {
    /// The candidate holding `cell`, if it is occupied.
    pub fn elite_at(&self, cell: [u32; 2]) -> Option<i64> {
        self.archive.iter().find(|e| e.cell == cell).map(|e| e.candidate)
    }

    /// Whether `candidate` holds a cell of this island's archive.
    pub fn contains(&self, candidate: i64) -> bool {
        self.archive.iter().any(|e| e.candidate == candidate)
    }
}

/// What a round of `evolve` was asked to do.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The round.
    pub round: u32,
    /// The island it worked on, an index into [`Evolve::islands`].
    pub island: usize,
    /// What the coder was asked: improve a parent, debug a failure, or write from the seed.
    pub kind: CodeKind,
    /// The sampled parent (`improve`), the failure to fix (`debug`), or the seed (`action`).
    pub parent: Option<i64>,
    /// Other elites shown to the coder for ideas, by candidate id.
    pub inspirations: Vec<i64>,
}

/// The best of island `from` offered to island `to` after round `round`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Migration {
    /// The round after which it moved.
    pub round: u32,
    /// The island it left (an index into [`Evolve::islands`]).
    pub from: usize,
    /// The island it was offered to.
    pub to: usize,
    /// The migrant, by candidate id.
    pub candidate: i64,
    /// Whether it took its cell (an empty one, or by beating the incumbent).
    pub accepted: bool,
}

/// The state of the `evolve` strategy, readable through [`Engine::evolve`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evolve {
    islands: Vec<Island>,
    steps: Vec<Step>,
    migrations: Vec<Migration>,
    grid: [u32; 2],
    migration_interval: u32,
    rng: SplitMix64,
    /// Rounds out now: (round, island), in the order they were asked.
    #[serde(skip)]
    running: Vec<(u32, usize)>,
    /// The island the next round tries first (round-robin).
    #[serde(skip)]
    next_island: usize,
    /// Rounds finished so far (migration counts these).
    #[serde(skip)]
    finished_rounds: u32,
    /// The run's "faster than" (`EngineConfig::compare`), for cells and ranks.
    #[serde(skip)]
    rule: CompareRule,
}

impl Evolve {
    pub(super) fn new(config: &EngineConfig) -> Evolve {
        let island = Island {
            archive: Vec::new(),
            children: Vec::new(),
            last: None,
        };
        Evolve {
            islands: vec![island; config.islands.max(1) as usize],
            steps: Vec::new(),
            migrations: Vec::new(),
            grid: [config.archive_grid[0].max(1), config.archive_grid[1].max(1)],
            migration_interval: config.migration_interval,
            rng: SplitMix64(config.rng_seed),
            running: Vec::new(),
            next_island: 0,
            finished_rounds: 0,
            rule: config.compare,
        }
    }

    /// The islands, in index order.
    pub fn islands(&self) -> &[Island] {
        &self.islands
    }

    /// Every round's request, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Every migration so far, in order.
    pub fn migrations(&self) -> &[Migration] {
        &self.migrations
    }

    /// The archive's grid size, `[size bins, loop bins]` (see [`descriptors`]).
    pub fn grid(&self) -> [u32; 2] {
        self.grid
    }

    /// The rounds out now, as (round, island).
    pub fn running(&self) -> &[(u32, usize)] {
        &self.running
    }

    /// The island a new round would go to: the first in round-robin order with no round out.
    fn free_island(&self) -> Option<usize> {
        let n = self.islands.len();
        (0..n)
            .map(|k| (self.next_island + k) % n)
            .find(|i| !self.running.iter().any(|(_, busy)| busy == i))
    }

    /// Puts `id` in its cell of island `i` if the cell is empty or `id` beats its incumbent.
    fn offer(&mut self, i: usize, id: i64, candidates: &[Candidate]) -> bool {
        let Some(c) = candidates.iter().find(|c| c.id == id).filter(|c| c.passed()) else {
            return false;
        };
        let cell = descriptors(&c.sources, self.grid);
        let result = |id: i64| candidates.iter().find(|c| c.id == id).and_then(|c| c.result.as_ref());
        let archive = &mut self.islands[i].archive;
        match archive.iter().position(|e| e.cell == cell) {
            Some(p) if archive[p].candidate == id => false,
            Some(p) => {
                let better = c
                    .result
                    .as_ref()
                    .is_some_and(|r| beats_by(self.rule, r, result(archive[p].candidate)));
                if better {
                    archive[p].candidate = id;
                }
                better
            }
            None => {
                let at = archive.partition_point(|e| e.cell < cell);
                archive.insert(at, Elite { cell, candidate: id });
                true
            }
        }
    }

    /// Island `i`'s elites, best first (ties: the older candidate first), by the run's rule:
    /// under `paired`, by their gain over the archive's first elite (their own times, paired by
    /// workload); under the legacy rule, by speedup.
    fn ranked(&self, i: usize, candidates: &[Candidate]) -> Vec<(i64, f64)> {
        let result = |id: i64| candidates.iter().find(|c| c.id == id).and_then(|c| c.result.as_ref());
        let anchor = self.islands[i]
            .archive
            .iter()
            .filter_map(|e| result(e.candidate))
            .find(|r| r.passed());
        let mut out: Vec<(i64, f64)> = self.islands[i]
            .archive
            .iter()
            .filter_map(|e| Some((e.candidate, rank_key(self.rule, result(e.candidate)?, anchor)?)))
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// A parent drawn by rank weight, and up to two inspirations (see the module docs).
    fn sample(&mut self, i: usize, candidates: &[Candidate]) -> Option<(i64, Vec<i64>)> {
        let ranked = self.ranked(i, candidates);
        let k = ranked.len() as u64;
        if k == 0 {
            return None;
        }
        let mut u = self.rng.below(k * (k + 1) / 2);
        let mut pick = 0;
        for r in 0..k {
            let w = k - r;
            if u < w {
                pick = r as usize;
                break;
            }
            u -= w;
        }
        let parent = ranked[pick].0;
        let others: Vec<i64> = ranked.iter().map(|r| r.0).filter(|id| *id != parent).collect();
        let mut inspirations: Vec<i64> = others.first().copied().into_iter().collect();
        if others.len() > 1 {
            let j = 1 + self.rng.below(others.len() as u64 - 1) as usize;
            inspirations.push(others[j]);
        }
        Some((parent, inspirations))
    }

    /// Offers each island's best (as it stood before any of these offers) to the next island.
    fn migrate(&mut self, round: u32, candidates: &[Candidate]) {
        let n = self.islands.len();
        if n < 2 {
            return;
        }
        let bests: Vec<Option<i64>> = (0..n)
            .map(|i| self.ranked(i, candidates).first().map(|b| b.0))
            .collect();
        for (from, best) in bests.into_iter().enumerate() {
            let Some(candidate) = best else { continue };
            let to = (from + 1) % n;
            let accepted = self.offer(to, candidate, candidates);
            self.migrations.push(Migration {
                round,
                from,
                to,
                candidate,
                accepted,
            });
        }
    }
}

fn state(e: &mut Engine) -> Result<&mut Evolve, EngineError> {
    e.evolve
        .as_mut()
        .ok_or_else(|| EngineError::Internal("the evolve strategy has no state".into()))
}

pub(super) fn start(e: &mut Engine) -> Result<(), EngineError> {
    e.cycle_count = 1;
    // A passing seed is every island's first elite.
    if let Some(seed) = refine::seed(e) {
        let Engine { evolve, candidates, .. } = e;
        let ev = evolve
            .as_mut()
            .ok_or_else(|| EngineError::Internal("the evolve strategy has no state".into()))?;
        for i in 0..ev.islands.len() {
            ev.offer(i, seed, candidates);
        }
    }
    fill(e)
}

/// Round `round` is over (its child measured, or no code came back).
pub(super) fn attempt_done(e: &mut Engine, tried: Tried, round: u32) -> Result<(), EngineError> {
    let Engine { evolve, candidates, .. } = e;
    let ev = evolve
        .as_mut()
        .ok_or_else(|| EngineError::Internal("the evolve strategy has no state".into()))?;
    let Some(at) = ev.running.iter().position(|(r, _)| *r == round) else {
        return Err(EngineError::Internal(format!("evolve round {round} is not running")));
    };
    let (_, i) = ev.running.remove(at);
    if let Some(id) = tried.candidate {
        ev.islands[i].children.push(id);
        // Only passing children are offered; `offer` refuses the others.
        ev.offer(i, id, candidates);
    }
    ev.islands[i].last = Some(tried);
    ev.finished_rounds += 1;
    let finished = ev.finished_rounds;
    if ev.migration_interval > 0 && finished.is_multiple_of(ev.migration_interval) {
        ev.migrate(finished, candidates);
    }
    fill(e)
}

/// A raised round budget: the rounds the old budget did not allow (budget.rs).
pub(super) fn resume(e: &mut Engine) -> Result<(), EngineError> {
    fill(e)
}

/// Starts rounds while the budget, `parallel` and free islands allow; finalizes when the budget
/// is spent and no round is out.
fn fill(e: &mut Engine) -> Result<(), EngineError> {
    let parallel = e.parallel();
    loop {
        let ev = state(e)?;
        let island = ev.free_island();
        let running = ev.running.len();
        match island {
            Some(i) if e.round < e.config.rounds && running < parallel => next_round(e, i)?,
            _ if running == 0 => {
                e.resume_at = Some(ResumeAt::Evolve);
                return e.finalize();
            }
            _ => return Ok(()),
        }
    }
}

fn next_round(e: &mut Engine, i: usize) -> Result<(), EngineError> {
    e.round += 1;
    let round = e.round;
    let Engine { evolve, candidates, .. } = e;
    let ev = evolve
        .as_mut()
        .ok_or_else(|| EngineError::Internal("the evolve strategy has no state".into()))?;
    ev.running.push((round, i));
    ev.next_island = (i + 1) % ev.islands.len();
    let sampled = ev.sample(i, candidates);
    let last = ev.islands[i].last.clone();
    let (kind, parent, inspirations) = match sampled {
        Some((parent, inspirations)) => (CodeKind::Improve, Some(parent), inspirations),
        // An empty archive: nothing passed here, so the island's latest attempt failed.
        None => match &last {
            Some(t) => (CodeKind::Debug, t.candidate.or(t.base), vec![]),
            None => (CodeKind::Action, refine::seed(e), vec![]),
        },
    };
    let n = {
        let ev = state(e)?;
        ev.steps.push(Step {
            round,
            island: i,
            kind,
            parent,
            inspirations: inspirations.clone(),
        });
        ev.islands.len()
    };
    let user = match kind {
        CodeKind::Improve => prompt(e, n, i, parent, &inspirations)?,
        _ => refine::prompt(e, kind, parent, last.as_ref())?,
    };
    refine::request_code(e, kind, parent, user)
}

fn prompt(
    e: &Engine,
    islands: usize,
    island: usize,
    parent: Option<i64>,
    inspirations: &[i64],
) -> Result<String, EngineError> {
    let parent = parent
        .and_then(|id| e.candidate(id))
        .ok_or_else(|| EngineError::Internal("an evolve round without its parent".into()))?;
    let inspirations: Vec<serde_json::Value> = inspirations
        .iter()
        .filter_map(|id| e.candidate(*id))
        .map(|c| json!({"id": c.id, "verdict": describe(c), "files": files(c)}))
        .collect();
    let ctx = json!({
        "task": task_json(e),
        "performance": performance(e),
        "islands": islands,
        "island": island + 1,
        "parent": {
            "id": parent.id,
            "verdict": describe(parent),
            "workloads": parent.result.as_ref().map(measurement_lines).unwrap_or_default(),
            "files": files(parent),
        },
        "inspirations": inspirations,
    });
    prompts::render("code_evolve.j2", ctx).map_err(EngineError::Internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str) -> Vec<Source> {
        vec![Source {
            path: "k.c".into(),
            content: text.into(),
        }]
    }

    #[test]
    fn descriptors_bin_size_and_loops_on_a_log_scale() {
        let grid = [4, 4];
        assert_eq!(descriptors(&src("x"), grid), [0, 0]);
        let loops = |n: usize| "for (;;) {}\n".repeat(n);
        assert_eq!(descriptors(&src(&loops(1)), grid), [0, 1]);
        assert_eq!(descriptors(&src(&loops(2)), grid), [0, 1]);
        assert_eq!(descriptors(&src(&loops(3)), grid), [0, 2]);
        assert_eq!(descriptors(&src(&loops(40)), grid), [1, 3]);
        assert_eq!(descriptors(&src(&"x;\n".repeat(64)), grid), [2, 0]);
        assert_eq!(
            descriptors(&src(&"x;\n".repeat(1000)), grid),
            [3, 0],
            "clamped to the grid"
        );
        assert_eq!(descriptors(&src(&"x;\n".repeat(1000)), [2, 1]), [1, 0]);
        // Comments and identifiers that merely contain the keywords do not count.
        let text = "// for each row\n/* while\n waiting */ int format, whilex; while (x) {}\n";
        assert_eq!(descriptors(&src(text), grid), [0, 1]);
        // Blank lines do not count; files add up.
        let two = vec![src(&"a;\n\n".repeat(20))[0].clone(), src(&"b;\n".repeat(20))[0].clone()];
        assert_eq!(descriptors(&two, grid), [1, 0]);
    }

    #[test]
    fn the_prng_is_deterministic_and_covers_its_range() {
        let mut a = SplitMix64(7);
        let mut b = SplitMix64(7);
        let xs: Vec<u64> = (0..100).map(|_| a.below(5)).collect();
        let ys: Vec<u64> = (0..100).map(|_| b.below(5)).collect();
        assert_eq!(xs, ys);
        assert!((0..5).all(|v| xs.contains(&v)), "{xs:?}");
        assert!(xs.iter().all(|x| *x < 5));
    }
}
