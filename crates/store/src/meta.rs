//! The run's metadata: the keys of the `meta` table, and the driver's stop record. This is
//! part of the run directory's contract (old run stores must keep reading, and other tools read
//! these rows), so every key and every stop reason is spelled here once; writers and readers
//! name them through [`MetaKey`] and [`StopReason`] instead of repeating the strings.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A key of the run's metadata (the `meta` table), with the JSON value each holds. The spellings
/// are fixed: runs written by any earlier version keep them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaKey {
    /// `task`: the task as `ksearch run` was given it (a built-in's name, a folder's absolute
    /// path), a string; for messages, the run itself works from its snapshot.
    Task,
    /// `task_snapshot`: where the task's copy in the run directory is and its digest (an object
    /// of ksearch-run's snapshot module).
    TaskSnapshot,
    /// `brain`: who answers the planner and the coder (ksearch-run's `BrainSpec`, an object).
    Brain,
    /// `brain_note`: the model behind an external agent, as `--agent-model` gave it, a string.
    BrainNote,
    /// `run_seed`: the run's seed (the engine's and the evaluations'), an unsigned integer.
    RunSeed,
    /// `ksearch_version`: the version of ksearch that created the run, a string.
    KsearchVersion,
    /// `executor`: where evaluations run (`local`, `deferred`, `ray`), a string.
    Executor,
    /// `ray`: the Ray cluster of a run whose executor is `ray` (an object).
    Ray,
    /// `profile`: `true` when candidates are profiled with Nsight Compute; absent otherwise.
    Profile,
    /// `devices`: the devices evaluations may use, as `--devices` gave them, a string.
    Devices,
    /// `context`: how much knowledge the brief carries (`full`, `none`, `hardware`), a string.
    Context,
    /// `max_in_flight`: the most requests ever served at once over the run's drives, an
    /// unsigned integer.
    MaxInFlight,
    /// `stopped`: why driving the run last stopped (a [`StopRecord`]), or `null` while a drive
    /// is under way.
    Stopped,
}

impl MetaKey {
    /// Every key, in the order a run writes them.
    pub const ALL: [MetaKey; 13] = [
        MetaKey::Task,
        MetaKey::TaskSnapshot,
        MetaKey::Brain,
        MetaKey::BrainNote,
        MetaKey::RunSeed,
        MetaKey::KsearchVersion,
        MetaKey::Executor,
        MetaKey::Ray,
        MetaKey::Profile,
        MetaKey::Devices,
        MetaKey::Context,
        MetaKey::MaxInFlight,
        MetaKey::Stopped,
    ];

    /// The key as stored in the `meta` table's `key` column.
    pub fn as_str(self) -> &'static str {
        match self {
            MetaKey::Task => "task",
            MetaKey::TaskSnapshot => "task_snapshot",
            MetaKey::Brain => "brain",
            MetaKey::BrainNote => "brain_note",
            MetaKey::RunSeed => "run_seed",
            MetaKey::KsearchVersion => "ksearch_version",
            MetaKey::Executor => "executor",
            MetaKey::Ray => "ray",
            MetaKey::Profile => "profile",
            MetaKey::Devices => "devices",
            MetaKey::Context => "context",
            MetaKey::MaxInFlight => "max_in_flight",
            MetaKey::Stopped => "stopped",
        }
    }
}

impl std::fmt::Display for MetaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why driving a run stopped: the `reason` of its [`StopRecord`]. Stored as its snake_case
/// spelling ([`StopReason::as_str`]); a spelling this build does not know (written by a newer
/// ksearch) is kept as [`StopReason::Other`] rather than refused.
#[derive(Debug, Clone)]
pub enum StopReason {
    /// `finished`: the engine reached its end (rounds spent, nothing left to try).
    Finished,
    /// `budget`: the LLM budget ran out and the search wound up early.
    Budget,
    /// `fatal`: an LLM request failed for good (a model, a key) and the search wound up early.
    Fatal,
    /// `llm_unavailable`: the LLM endpoint failed several requests in a row; resumable.
    LlmUnavailable,
    /// `llm_refused`: the LLM endpoint refused the credentials; resumable once the key works.
    LlmRefused,
    /// `executor_unavailable`: the executor (a Ray cluster) went away; resumable.
    ExecutorUnavailable,
    /// `interrupted`: stopped by Ctrl-C; resumable.
    Interrupted,
    /// `error`: ksearch failed (a missing key, no device, a store error).
    Error,
    /// `awaiting_agent`: requests wait for an external agent's answers.
    AwaitingAgent,
    /// `awaiting_evaluation`: candidates wait for `ksearch evaluate`.
    AwaitingEvaluation,
    /// A reason this build does not know, as it was stored. Never holds a known spelling
    /// ([`StopReason::parse`] gives the named variant for those).
    Other(String),
}

impl StopReason {
    /// Every reason this build knows, [`StopReason::Other`] aside.
    pub const KNOWN: [StopReason; 10] = [
        StopReason::Finished,
        StopReason::Budget,
        StopReason::Fatal,
        StopReason::LlmUnavailable,
        StopReason::LlmRefused,
        StopReason::ExecutorUnavailable,
        StopReason::Interrupted,
        StopReason::Error,
        StopReason::AwaitingAgent,
        StopReason::AwaitingEvaluation,
    ];

    /// The reason as stored (`llm_unavailable`); an unknown one as it was read.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::Finished => "finished",
            StopReason::Budget => "budget",
            StopReason::Fatal => "fatal",
            StopReason::LlmUnavailable => "llm_unavailable",
            StopReason::LlmRefused => "llm_refused",
            StopReason::ExecutorUnavailable => "executor_unavailable",
            StopReason::Interrupted => "interrupted",
            StopReason::Error => "error",
            StopReason::AwaitingAgent => "awaiting_agent",
            StopReason::AwaitingEvaluation => "awaiting_evaluation",
            StopReason::Other(s) => s,
        }
    }

    /// The reason a stored spelling names; [`StopReason::Other`] for one this build does not
    /// know. Never fails: a newer ksearch may add reasons.
    pub fn parse(s: &str) -> StopReason {
        StopReason::KNOWN
            .into_iter()
            .find(|r| r.as_str() == s)
            .unwrap_or_else(|| StopReason::Other(s.to_string()))
    }
}

// Equal by spelling, so that an `Other` built by hand with a known spelling still equals the
// named variant (the stored string is what the contract is about).
impl PartialEq for StopReason {
    fn eq(&self, other: &StopReason) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for StopReason {}

impl std::hash::Hash for StopReason {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl std::fmt::Display for StopReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<StopReason, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(StopReason::parse(&s))
    }
}

/// What the driver records under [`MetaKey::Stopped`] when it stops driving a run: why, when,
/// and the message that goes with it, so that a report or the dashboard can tell a stopped run
/// from a live one. Stored as `{"reason": ..., "at": ..., "detail": ...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Why driving stopped.
    pub reason: StopReason,
    /// When: seconds since the Unix epoch.
    pub at: f64,
    /// The message that goes with it (the driver writes an empty one where there is none);
    /// `None` when the record has no `detail`.
    #[serde(default)]
    pub detail: Option<String>,
}

impl StopRecord {
    /// A record of `reason` stopping the run now, with `detail`.
    pub fn now(reason: StopReason, detail: &str) -> StopRecord {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        StopRecord {
            reason,
            at,
            detail: Some(detail.to_string()),
        }
    }

    /// The record as stored: keys in the order the driver has always written them (`reason`,
    /// `at`, `detail`). Built by hand rather than through `serde_json::to_value`, which can fail
    /// in general and so would need an error that cannot happen here.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"reason": self.reason.as_str(), "at": self.at, "detail": self.detail})
    }
}
