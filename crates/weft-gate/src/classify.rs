//! The ACT step of the protocol's decision loop: classify the task, then execute it through
//! the appropriate tool.
//!
//! [`classify_task`] follows the reference implementation's rules (`task-classifier.ts`):
//! eight categories — `sysadmin`, `security`, `ml-training`, `debugging`, `coding`,
//! `file-ops`, `testing`, `constraint-satisfaction` — each a set of patterns (2 points
//! each when one of its words occurs) and keywords (1 point each); the best score wins
//! (ties go to the earlier category), `unknown` when nothing matched; the confidence is the
//! score over the category's maximum. On top of that it decides what the loop should do:
//! whether the task changes files (then it needs a worktree) or is read-only (analysis,
//! diagnostics, queries: no worktree), the tool to act with, and what to QUERY first.
//!
//! ```
//! let task = weft_gate::classify_task("Fix the crash in the login handler and add a regression test");
//! assert_eq!(task.category, "debugging");
//! assert!(task.changes_files);
//! assert!(task.act.contains("weft deliver"));
//! let question = weft_gate::classify_task("Explain how the DNS resolver is configured");
//! assert_eq!(question.category, "sysadmin");
//! assert!(!question.changes_files);
//! ```

use std::fmt::Write as _;

/// A classified task and the loop's plan for it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskClass {
    /// One of the eight categories, or `unknown`.
    pub category: &'static str,
    /// Score over the category's maximum, 0–1.
    pub confidence: f64,
    /// The category's keywords found in the text.
    pub keywords: Vec<&'static str>,
    /// Whether the task changes files (and so needs a worktree); false for analysis,
    /// diagnostics and queries.
    pub changes_files: bool,
    /// How to ACT: the tool or command to execute the task with.
    pub act: String,
    /// What to QUERY long-term memory for before acting.
    pub memory_queries: Vec<String>,
}

struct Category {
    name: &'static str,
    /// Each pattern scores 2 when any of its words occurs (a word ending in `*` is a prefix).
    patterns: &'static [&'static [&'static str]],
    keywords: &'static [&'static str],
    /// The tool to act with when the task changes files.
    act: &'static str,
}

const CATEGORIES: &[Category] = &[
    Category {
        name: "sysadmin",
        patterns: &[
            &["kernel", "linux", "qemu", "kvm", "virtualization"],
            &["systemd", "systemctl", "journalctl", "service"],
            &["network", "dns", "firewall", "iptables", "nftables"],
            &["cron", "crontab", "scheduling", "daemon"],
            &["mount", "filesystem", "partition", "lvm", "fdisk"],
            &["docker", "container", "kubernetes", "k8s"],
            &["nginx", "apache", "web server", "reverse proxy"],
            &["ssh", "scp", "rsync", "remote"],
        ],
        keywords: &[
            "kernel", "qemu", "systemd", "network", "dns", "cron", "docker", "mount", "ssh",
        ],
        act: "Bash (the shell; the dangerous-command guard applies)",
    },
    Category {
        name: "security",
        patterns: &[
            &["cve-*", "cve"],
            &["exploit", "vulnerability", "attack", "injection"],
            &[
                "secret",
                "password",
                "credential",
                "token",
                "api key",
                "apikey",
            ],
            &["hash", "crack", "bcrypt", "sha", "md5"],
            &["ssl", "tls", "certificate", "x509"],
            &["encrypt*", "decrypt*", "cipher", "aes"],
            &["auth*", "oauth", "jwt", "session"],
            &["sanitize", "escape", "xss", "csrf", "sqli"],
        ],
        keywords: &[
            "cve",
            "exploit",
            "secret",
            "hash",
            "certificate",
            "encrypt",
            "authentication",
        ],
        act: "Edit/Write in a worktree, then the expert review (`review` completion gate)",
    },
    Category {
        name: "ml-training",
        patterns: &[
            &["train*", "model", "neural", "deep learning"],
            &["pytorch", "tensorflow", "keras", "transformers"],
            &["dataset", "dataloader", "batch", "epoch"],
            &[
                "mteb",
                "embedding*",
                "sentence transformer",
                "sentence-transformer",
            ],
            &["classifier", "classification", "regression"],
            &["reinforcement", "rl", "reward", "agent", "gym"],
            &["gpu", "cuda", "nvidia", "tensor"],
            &["hugging face", "huggingface", "tokenizer", "bert", "gpt"],
        ],
        keywords: &[
            "train",
            "model",
            "pytorch",
            "dataset",
            "embedding",
            "classifier",
            "gpu",
        ],
        act: "Bash (training and evaluation scripts), Edit/Write in a worktree for code",
    },
    Category {
        name: "debugging",
        patterns: &[
            &["debug*", "fix*", "broken", "error*", "exception*"],
            &["conda", "pip", "dependency", "conflict", "version"],
            &["git", "merge", "rebase", "conflict", "reflog"],
            &["stack trace", "stacktrace", "traceback", "crash*"],
            &["memory leak", "segfault", "core dump"],
            &["log", "logging", "logs", "diagnose", "troubleshoot"],
        ],
        keywords: &[
            "debug", "fix", "error", "conda", "pip", "git", "conflict", "crash",
        ],
        act: "`weft deliver` (the verifier ladder until every gate passes), or Edit/Write in a worktree",
    },
    Category {
        name: "coding",
        patterns: &[
            &["implement*", "function", "class", "method", "algorithm"],
            &["refactor*", "optimi*", "improve", "clean"],
            &["api", "endpoint", "rest", "graphql", "server"],
            &["typescript", "javascript", "python", "rust", "go"],
            &["singleton", "factory", "strategy", "pattern"],
            &["async", "await", "promise", "callback"],
        ],
        keywords: &[
            "implement",
            "function",
            "class",
            "refactor",
            "api",
            "algorithm",
            "pattern",
        ],
        act: "`weft deliver`, or Edit/Write in a worktree (then the completion gates)",
    },
    Category {
        name: "file-ops",
        patterns: &[
            &["archive", "zip", "tar", "extract", "compress"],
            &["download", "fetch", "curl", "wget"],
            &["convert", "transform", "parse", "format"],
            &["csv", "json", "xml", "yaml", "parquet"],
            &["file", "files", "directory", "path", "copy", "move"],
        ],
        keywords: &["archive", "download", "convert", "file", "extract"],
        act: "Bash, or a routed MCP tool (`weft mcp router`: discover_tools, execute_tool)",
    },
    Category {
        name: "testing",
        patterns: &[
            &[
                "test",
                "tests",
                "testing",
                "spec",
                "unit",
                "integration",
                "e2e",
            ],
            &["vitest", "jest", "pytest", "mocha", "cypress"],
            &["coverage", "assertion", "mock", "stub", "spy"],
            &["tdd", "bdd", "test-driven", "test driven"],
        ],
        keywords: &["test", "spec", "coverage", "mock", "assertion"],
        act: "Edit/Write tests in a worktree; a new test must fail without the change (`newTests`)",
    },
    Category {
        name: "constraint-satisfaction",
        patterns: &[
            &["schedul*", "timetabl*", "allocat*"],
            &["constraint", "satisfy", "feasible", "optimal"],
            &["resource allocation", "slot", "capacity"],
            &["minimize", "maximize", "objective", "cost function"],
            &["backtrack*", "search", "pruning", "heuristic"],
        ],
        keywords: &[
            "schedule",
            "constraint",
            "optimize",
            "allocate",
            "slot",
            "feasible",
        ],
        act: "Edit/Write a solver in a worktree, verified by tests",
    },
];

/// Words that make a task read-only (analysis, diagnostics, queries) unless a changing verb
/// is there too.
const READ_ONLY: &[&str] = &[
    "explain",
    "describe",
    "summarize",
    "summarise",
    "analyze",
    "analyse",
    "investigate",
    "diagnose",
    "review",
    "list",
    "show",
    "find",
    "search",
    "what",
    "why",
    "how",
    "where",
    "which",
    "who",
    "audit",
    "inspect",
    "read",
    "check",
    "compare",
    "query",
    "report",
];

const CHANGING: &[&str] = &[
    "add",
    "implement*",
    "fix*",
    "write",
    "create",
    "change",
    "update",
    "refactor*",
    "remove",
    "delete",
    "rename",
    "replace",
    "migrate",
    "bump",
    "edit",
    "modify",
    "build",
    "install",
    "configure",
    "upgrade",
    "patch",
    "set up",
    "setup",
    "make",
    "move",
    "generate",
];

/// The lowercase words of `text` (letters, digits, `-`, `_`).
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether `needle` (a word, a prefix ending in `*`, or several words) occurs in `text`.
fn occurs(words: &[String], joined: &str, needle: &str) -> bool {
    if let Some(prefix) = needle.strip_suffix('*') {
        return words.iter().any(|w| w.starts_with(prefix));
    }
    if needle.contains(' ') {
        return joined.contains(&format!(" {needle} "));
    }
    words.iter().any(|w| w == needle)
}

/// Classifies a task's text and plans the loop for it.
pub fn classify_task(text: &str) -> TaskClass {
    let words = words(text);
    let joined = format!(" {} ", words.join(" "));
    let mut best: Option<(&Category, usize, Vec<&'static str>)> = None;
    for category in CATEGORIES {
        let mut score = 0;
        for pattern in category.patterns {
            if pattern.iter().any(|n| occurs(&words, &joined, n)) {
                score += 2;
            }
        }
        let mut found = Vec::new();
        for keyword in category.keywords {
            if words.iter().any(|w| w.starts_with(keyword)) {
                score += 1;
                found.push(*keyword);
            }
        }
        if score > best.as_ref().map_or(0, |b| b.1) {
            best = Some((category, score, found));
        }
    }
    let changing = CHANGING.iter().any(|n| occurs(&words, &joined, n));
    let reading =
        READ_ONLY.iter().any(|n| occurs(&words, &joined, n)) || text.trim_end().ends_with('?');
    let changes_files = changing || !reading;
    let (category, confidence, keywords, act) = match best {
        None => (
            "unknown",
            0.0,
            Vec::new(),
            "Edit/Write in a worktree (ask for what is unclear first)",
        ),
        Some((c, score, found)) => {
            let max = c.patterns.len() * 2 + c.keywords.len();
            #[allow(clippy::cast_precision_loss)]
            let confidence = (score as f64 / max as f64).min(1.0);
            (c.name, confidence, found, c.act)
        }
    };
    let act = if changes_files {
        act.to_owned()
    } else {
        "read-only: Read/Grep/Bash queries or a routed MCP tool; no worktree needed".to_owned()
    };
    let mut memory_queries = vec![format!("{category} lessons")];
    memory_queries.extend(keywords.iter().take(3).map(|k| (*k).to_owned()));
    TaskClass {
        category,
        confidence,
        keywords,
        changes_files,
        act,
        memory_queries,
    }
}

impl TaskClass {
    /// The loop's plan for this task, as injected into the agent's context.
    pub fn plan(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Task class: {} (confidence {:.2}{}); {}.",
            self.category,
            self.confidence,
            if self.keywords.is_empty() {
                String::new()
            } else {
                format!(", matched: {}", self.keywords.join(", "))
            },
            if self.changes_files {
                "it changes files: work in a worktree (`weft worktree create <slug>`)"
            } else {
                "read-only: no worktree needed"
            }
        );
        let queries: Vec<String> = self
            .memory_queries
            .iter()
            .map(|q| format!("`weft memory query \"{q}\"`"))
            .collect();
        let _ = writeln!(
            out,
            "Loop: READ the <uap-context> memories → QUERY {} → ACT via {} → RECORD `weft memory store \"<observation>\"` → PROMOTE `weft memory promote` (only through the write gate).",
            queries.join(", "),
            self.act
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_categories_are_found() {
        let cases = [
            (
                "Set up a systemd service and a cron job on the linux box",
                "sysadmin",
            ),
            (
                "Rotate the leaked API key and check the JWT signing secret",
                "security",
            ),
            (
                "Train the classifier on the new dataset with pytorch on the GPU",
                "ml-training",
            ),
            (
                "Fix the crash: the traceback shows a pip dependency conflict",
                "debugging",
            ),
            (
                "Implement an async API endpoint in rust and refactor the handler class",
                "coding",
            ),
            (
                "Download the archive, extract it and convert the CSV files to JSON",
                "file-ops",
            ),
            (
                "Raise the pytest coverage and mock the clock in the unit tests",
                "testing",
            ),
            (
                "Schedule the meetings into slots so every constraint is satisfied and cost is minimized",
                "constraint-satisfaction",
            ),
            ("Hello there", "unknown"),
        ];
        for (text, expected) in cases {
            assert_eq!(classify_task(text).category, expected, "{text}");
        }
    }

    #[test]
    fn read_only_tasks_need_no_worktree() {
        assert!(!classify_task("Why does the nginx reverse proxy return 502?").changes_files);
        assert!(!classify_task("Summarize the failing logs").changes_files);
        let fix = classify_task("Explain and then fix the failing logs");
        assert!(fix.changes_files);
        assert!(fix.plan().contains("work in a worktree"));
        assert!(
            fix.plan()
                .contains("`weft memory query \"debugging lessons\"`")
        );
    }
}
