//! Declarative configuration (`configs/*.toml`) and `ccload apply`: the
//! kernel is reconciled to the file — controllers attached or detached,
//! tunables of every profile written, cgroups bound or unbound, the default
//! CC set — and the difference is printed.  Applying a file twice changes
//! nothing the second time.  Everything is validated before the first
//! change; errors carry `file:line:col`.  docs/config.md is the reference
//! (a test holds it to the parser's keys and the tunables tables).
//!
//! A config may be several files (`apply A B`, `serve --config A --config
//! B`): later files add to earlier ones, as if one file.  Each table lives in
//! one file (`[algos.ccpd]`, a profile, `[serve]`, `default_cc`), the
//! `[[...]]` lists are joined in file order, and a later file may use what
//! an earlier one defined (a profile, an algorithm).  So a fleet keeps its
//! controllers and tunables in one file and each pool adds its own
//! `[serve]` and `[[pods]]` (deploy/kubernetes).
//!
//! ```toml
//! default_cc = "cubic"              # optional, initial netns only
//! [algos.ccpd]                      # attach; `set` = profile 0 tunables
//! set = { kp = 4 }
//! [profiles.latency]                # named profile: a stable id 1..15 (profiles.rs)
//! algo = "ccpd"
//! set = { kp = 2, kd = 100 }
//! [[cgroups]]                       # may not exist yet; may be a glob
//! path = "/sys/fs/cgroup/web.slice"  # (cgroup_rules.rs)
//! algo = "ccpd"
//! profile = "latency"
//! rules = ["dst 10.0.0.0/8 -> cubic"] # per connection (path_rules.rs)
//! [[pods]]                          # `ccload serve`: this node's pods by label
//! selector = "app=web"              # (crate::bind::pods, serve/pods.rs)
//! algo = "ccpd"
//! [[rollouts]]                      # `ccload serve` runs them (ccload rollout)
//! algo = "ccpd"
//! profile = "latency"
//! canary = "/sys/fs/cgroup/web-canary.slice"
//! control = "/sys/fs/cgroup/web.slice"
//! guards = ["retrans_ratio <= 1.5", "srtt_p95_ratio <= 1.2"]
//! interval = "30s"
//! for = "10m"
//! [serve]                           # for `ccload serve`
//! metrics = "127.0.0.1:9464"
//! on_exit = "keep"                  # or "remove"
//! max_connections = 64              # metrics connections served at once
//! request_timeout_ms = 10000        # whole HTTP exchange, read + write
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use toml::Spanned;

use crate::bind::cgroup_rules::CgroupRule;
use crate::bpf::algos::{Algo, Params};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub default_cc: Option<Spanned<String>>,
    #[serde(default)]
    pub algos: BTreeMap<Spanned<String>, AlgoCfg>,
    #[serde(default)]
    pub profiles: BTreeMap<Spanned<String>, ProfileCfg>,
    #[serde(default)]
    pub cgroups: Vec<CgroupCfg>,
    #[serde(default)]
    pub rollouts: Vec<RolloutCfg>,
    #[serde(default)]
    pub pods: Vec<PodsCfg>,
    /// None: the defaults (or another file's `[serve]`).
    pub serve: Option<ServeCfg>,
}

/// Pods of this node chosen by label (`ccload serve` watches them through
/// the Kubernetes API; crate::bind::pods).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodsCfg {
    pub selector: Spanned<String>,
    pub namespace: Option<Spanned<String>>,
    pub algo: Spanned<String>,
    pub profile: Option<Spanned<String>>,
    /// Path rules of the pods' bindings (path_rules.rs syntax).
    #[serde(default)]
    pub rules: Vec<Spanned<String>>,
}

/// A canary rollout `ccload serve` runs (crate::bind::rollout; the fields are
/// `ccload rollout`'s options).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RolloutCfg {
    pub algo: Spanned<String>,
    pub profile: Option<Spanned<String>>,
    /// A canary and a control cgroup, or one of `ab` and `pods`.
    pub canary: Option<Spanned<PathBuf>>,
    pub control: Option<Spanned<PathBuf>>,
    /// A/B inside this cgroup (`ccload rollout --ab`).
    pub ab: Option<Spanned<PathBuf>>,
    /// A/B inside each pod of this node the label selector chooses (and
    /// `namespace` too, when given): one rollout per pod, following them.
    pub pods: Option<Spanned<String>>,
    pub namespace: Option<Spanned<String>>,
    /// With `ab` or `pods`: the candidate's share of the connections.
    pub share: Option<Spanned<f64>>,
    #[serde(default)]
    pub guards: Vec<Spanned<String>>,
    pub interval: Option<Spanned<String>>,
    #[serde(rename = "for")]
    pub duration: Option<Spanned<String>>,
    pub fail_after: Option<u32>,
    pub min_segments: Option<u64>,
    #[serde(default)]
    pub promote: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlgoCfg {
    #[serde(default)]
    pub set: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileCfg {
    pub algo: Spanned<String>,
    #[serde(default)]
    pub set: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupCfg {
    pub path: Spanned<PathBuf>,
    pub algo: Spanned<String>,
    pub profile: Option<Spanned<String>>,
    /// Path rules, `MATCH -> CC[/PROFILE]` (path_rules.rs): the first that
    /// matches a connection chooses; `algo` and `profile` are for the rest.
    #[serde(default)]
    pub rules: Vec<Spanned<String>>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum OnExit {
    Keep,
    Remove,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeCfg {
    #[serde(default = "default_metrics")]
    pub metrics: String,
    #[serde(default = "default_on_exit")]
    pub on_exit: OnExit,
    /// Local socket where `ccload watch` clients get telemetry.
    #[serde(default = "default_socket")]
    pub socket: PathBuf,
    /// Metrics connections served at once; more are closed unanswered.
    #[serde(default = "default_max_connections")]
    pub max_connections: Spanned<u32>,
    /// Deadline of one HTTP exchange (accept to last byte written), ms.
    #[serde(default = "default_request_timeout_ms")]
    pub request_timeout_ms: Spanned<u32>,
    /// `[[pods]]`: this node's name (default: $NODE_NAME).
    pub node_name: Option<String>,
    /// `[[pods]]`: where the kubelet's cgroups are.
    #[serde(default = "default_cgroup_root")]
    pub cgroup_root: PathBuf,
    /// `[[pods]]`: the kubelet's cgroup driver (default: from the tree).
    pub cgroup_driver: Option<crate::bind::pods::Driver>,
}

fn default_cgroup_root() -> PathBuf {
    "/sys/fs/cgroup".into()
}

fn default_max_connections() -> Spanned<u32> {
    Spanned::new(0..0, 64)
}
fn default_request_timeout_ms() -> Spanned<u32> {
    Spanned::new(0..0, 10_000)
}

fn default_metrics() -> String {
    "127.0.0.1:9464".into()
}
fn default_on_exit() -> OnExit {
    OnExit::Keep
}
/// Where `serve` fans telemetry out and `watch` looks for it.
pub const DEFAULT_SOCKET: &str = "/run/ccload/telemetry.sock";

fn default_socket() -> PathBuf {
    DEFAULT_SOCKET.into()
}

impl Default for ServeCfg {
    fn default() -> Self {
        ServeCfg {
            metrics: default_metrics(),
            on_exit: default_on_exit(),
            socket: default_socket(),
            max_connections: default_max_connections(),
            request_timeout_ms: default_request_timeout_ms(),
            node_name: None,
            cgroup_root: default_cgroup_root(),
            cgroup_driver: None,
        }
    }
}

/// The validated, resolved desired state.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub default_cc: Option<String>,
    /// Attached algorithms and their params per profile id (0 = base).
    pub algos: BTreeMap<Algo, BTreeMap<u32, Params>>,
    /// Profile names per (algo, id), for messages and metrics labels.
    pub profile_names: BTreeMap<(Algo, u32), String>,
    /// The `[[cgroups]]` entries, in file order (cgroup_rules.rs).
    pub cgroups: Vec<CgroupRule>,
    /// Rollouts `serve` runs, validated.
    pub rollouts: Vec<crate::bind::rollout::Opts>,
    /// `[[pods]]` entries, in file order (`serve` binds their pods' cgroups).
    pub pods: Vec<crate::bind::pods::PodRule>,
    /// `[[rollouts]]` with `pods`: an A/B rollout in each pod they choose
    /// (`serve` runs them as the pods come and go).
    pub pod_rollouts: Vec<crate::bind::pods::PodRollout>,
    pub serve: ServeCfgResolved,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ServeCfgResolved {
    pub metrics: String,
    pub remove_on_exit: bool,
    pub socket: PathBuf,
    pub max_connections: usize,
    pub request_timeout: std::time::Duration,
    /// For `[[pods]]`: the node, the cgroup root, the driver (None: detect).
    pub node_name: Option<String>,
    pub cgroup_root: PathBuf,
    pub cgroup_driver: Option<crate::bind::pods::Driver>,
}

/// `file:line:col: msg` for a byte span of `text`.
mod parse;
mod reconcile;

pub use parse::{load, load_all, parse, parse_all, read, read_all, Source};
pub use reconcile::{execute, plan, plan_cgroups, with_pods, Change};

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// The ```toml blocks of docs/config.md.
    fn reference() -> (String, Vec<String>) {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/config.md"),
        )
        .unwrap();
        let blocks = doc
            .split("```toml\n")
            .skip(1)
            .map(|b| b.split("```").next().unwrap().to_string())
            .collect();
        (doc, blocks)
    }

    /// docs/config.md: every example parses (the schema always; the whole
    /// validation where the cgroups it names can be checked here), every
    /// key the parser accepts is in its table, and its tunables tables are
    /// the controllers' own.
    #[test]
    fn the_config_reference_examples_parse() {
        let (doc, blocks) = reference();
        assert!(blocks.len() >= 5, "{} examples", blocks.len());
        let v2 = crate::host::system::cgroup2_mount().map(|p| p.display().to_string());
        for b in &blocks {
            toml::from_str::<Config>(b).unwrap_or_else(|e| panic!("{e}\n{b}"));
            // A rollout's cgroups must exist: the schema only.
            if b.contains("[[rollouts]]") {
                continue;
            }
            let Some(root) = &v2 else {
                eprintln!("no cgroup v2 mount: examples checked against the schema only");
                continue;
            };
            let t = b.replace("/sys/fs/cgroup/", &format!("{root}/"));
            if let Err(e) = parse(Path::new("example.toml"), &t) {
                panic!("{e:#}\n{t}");
            }
        }
        // Every key, from the parser's own list of expected fields.
        let doc_keys: Vec<&str> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .collect();
        for (prefix, text) in [
            ("", "bogus = 1\n"),
            ("algos.<algo>.", "[algos.ccpd]\nbogus = 1\n"),
            (
                "profiles.<name>.",
                "[profiles.x]\nalgo = \"ccpd\"\nbogus = 1\n",
            ),
            (
                "cgroups[].",
                "[[cgroups]]\npath = \"/x\"\nalgo = \"ccpd\"\nbogus = 1\n",
            ),
            (
                "rollouts[].",
                "[[rollouts]]\nalgo = \"ccpd\"\ncanary = \"/a\"\ncontrol = \"/b\"\nbogus = 1\n",
            ),
            ("serve.", "[serve]\nbogus = 1\n"),
            (
                "pods[].",
                "[[pods]]\nselector = \"a=b\"\nalgo = \"ccpd\"\nbogus = 1\n",
            ),
        ] {
            let e = toml::from_str::<Config>(text).unwrap_err().to_string();
            let expected = e.split("expected").nth(1).unwrap_or_else(|| panic!("{e}"));
            let keys: Vec<&str> = expected.split('`').skip(1).step_by(2).collect();
            assert!(!keys.is_empty(), "{e}");
            for k in keys {
                let full = format!("{prefix}{k}");
                assert!(
                    doc_keys
                        .iter()
                        .any(|d| *d == full || (prefix.is_empty() && d.starts_with(&full))),
                    "docs/config.md has no row for `{full}`"
                );
            }
        }
        // Tunables: name, default, range, unit and meaning as `ccload algos`
        // shows them, the rows of the controller's own page
        // (Algo::tunables_markdown).
        for a in Algo::ALL {
            let sec = doc
                .split(&format!("### `{}`\n", a.name()))
                .nth(1)
                .unwrap_or_else(|| panic!("docs/config.md: no tunables of {a}"));
            let sec = sec.split("\n### ").next().unwrap();
            for row in a
                .tunables_markdown()
                .lines()
                .filter(|l| l.starts_with("| `"))
            {
                assert!(sec.contains(row), "docs/config.md, {a}: want {row}");
            }
            assert_eq!(
                sec.lines().filter(|l| l.starts_with("| `")).count(),
                a.params().len(),
                "docs/config.md, {a}: a tunable it lists is gone"
            );
        }
    }

    fn err(text: &str) -> String {
        format!("{:#}", parse(Path::new("t.toml"), text).unwrap_err())
    }

    #[test]
    fn errors_carry_file_line_col() {
        let e = err("[algos.ccpd]\nset = { kp = 4 }\nbogus = 1\n");
        assert!(e.starts_with("t.toml:3:1:") && e.contains("bogus"), "{e}");
        let e = err("[algos.ccpd]\nset = { kp = 99 }\n");
        assert!(e.starts_with("t.toml:2:14:") && e.contains("kp"), "{e}");
        let e = err("[algos.ccpd]\nset = { nope = 1 }\n");
        assert!(
            e.starts_with("t.toml:2:9:") && e.contains("unknown tunable"),
            "{e}"
        );
        let e = err("[algos.nosuch]\n");
        assert!(
            e.starts_with("t.toml:1:8:") && e.contains("unknown algorithm"),
            "{e}"
        );
        let e = err("[algos.ccpd]\n[profiles.x]\nalgo = \"hetcp\"\n");
        assert!(
            e.starts_with("t.toml:3:8:") && e.contains("not in [algos]"),
            "{e}"
        );
        // A path that does not exist yet is fine inside a cgroup v2 tree
        // (cgroup_rules.rs), not outside one; nor is a relative pattern.
        let e = err("[algos.ccpd]\n[[cgroups]]\npath = \"/nonexistent-cg\"\nalgo = \"ccpd\"\n");
        assert!(
            e.starts_with("t.toml:3:8:") && e.contains("not in a cgroup v2 hierarchy"),
            "{e}"
        );
        let e = err("[algos.ccpd]\n[[cgroups]]\npath = \"rel/*\"\nalgo = \"ccpd\"\n");
        assert!(
            e.starts_with("t.toml:3:8:") && e.contains("must be absolute"),
            "{e}"
        );
        let e = err("[serve]\non_exit = \"maybe\"\n");
        assert!(e.starts_with("t.toml:2:11:"), "{e}");
    }

    #[test]
    fn pods_entries_are_validated_and_resolved() {
        let base = "[algos.ccpd]\n[profiles.web]\nalgo = \"ccpd\"\n[serve]\nnode_name = \"n1\"\n";
        let d = parse(
            Path::new("t.toml"),
            &format!("{base}[[pods]]\nselector = \"app=web,tier in (a,b)\"\nnamespace = \"shop\"\nalgo = \"ccpd\"\nprofile = \"web\"\n"),
        )
        .unwrap();
        assert_eq!(d.pods.len(), 1);
        assert_eq!((d.pods[0].cc.as_str(), d.pods[0].profile), ("ccpd", 1));
        assert_eq!(d.pods[0].namespace.as_deref(), Some("shop"));
        assert_eq!(d.serve.node_name.as_deref(), Some("n1"));
        assert_eq!(d.serve.cgroup_root, Path::new("/sys/fs/cgroup"));
        // A bad selector, a profile of a kernel CC, a missing node name:
        // each points at its line.
        let e = err(&format!(
            "{base}[[pods]]\nselector = \"app in web\"\nalgo = \"ccpd\"\n"
        ));
        assert!(
            e.starts_with("t.toml:7:12:") && e.contains("want (v1, v2"),
            "{e}"
        );
        let e = err(&format!(
            "{base}[[pods]]\nselector = \"a=b\"\nalgo = \"cubic\"\nprofile = \"web\"\n"
        ));
        assert!(e.contains("is a kernel CC"), "{e}");
        if std::env::var_os("NODE_NAME").is_none() {
            let e = err("[algos.ccpd]\n[[pods]]\nselector = \"a=b\"\nalgo = \"ccpd\"\n");
            assert!(
                e.starts_with("t.toml:3:12:") && e.contains("NODE_NAME"),
                "{e}"
            );
        }
        let e = err("[serve]\ncgroup_driver = \"docker\"\n");
        assert!(e.contains("unknown variant `docker`"), "{e}");
        let d = parse(
            Path::new("t.toml"),
            "[serve]\ncgroup_driver = \"cgroupfs\"\n",
        )
        .unwrap();
        assert_eq!(
            d.serve.cgroup_driver,
            Some(crate::bind::pods::Driver::Cgroupfs)
        );
    }

    #[test]
    fn rollouts_are_validated_and_resolved() {
        let Some(root) = crate::host::system::cgroup2_mount() else {
            eprintln!("skipped: no cgroup2 mount to name in the config");
            return;
        };
        let r = root.display();
        let base = format!(
            "[algos.ccpd]\n[profiles.lat]\nalgo = \"ccpd\"\n[[rollouts]]\nalgo = \"ccpd\"\ncanary = \"{r}\"\ncontrol = \"{r}\"\n"
        );
        let d = parse(
            Path::new("t.toml"),
            &format!("{base}profile = \"lat\"\ninterval = \"5s\"\n"),
        )
        .unwrap();
        let o = &d.rollouts[0];
        assert_eq!(
            (o.profile, o.interval.as_secs(), o.duration.as_secs()),
            (1, 5, 600)
        );
        assert_eq!((o.fail_after, o.min_segments, o.promote), (2, 200, false));
        assert_eq!(o.guards, crate::bind::rollout::default_guards());
        let e = err(&format!("{base}guards = [\"retrans_ratio <= x\"]\n"));
        assert!(
            e.starts_with("t.toml:8:11:") && e.contains("not a number"),
            "{e}"
        );
        let e = err(&format!("{base}profile = \"nope\"\n"));
        assert!(
            e.starts_with("t.toml:8:11:") && e.contains("unknown profile `nope`"),
            "{e}"
        );
        let e = err(&format!("{base}for = \"soon\"\n"));
        assert!(e.starts_with("t.toml:8:7:"), "{e}");
        let e = err(&base.replace(
            "[algos.ccpd]\n[profiles.lat]\nalgo = \"ccpd\"\n",
            "[algos.hetcp]\n",
        ));
        assert!(e.contains("not in [algos]"), "{e}");
    }

    /// The A/B forms of `[[rollouts]]`: `ab` (one cgroup, both arms) and
    /// `pods` (a selector, expanded per pod by `with_pods`); exactly one
    /// form, `share` inside 0..1 and only on A/B, `namespace` only with
    /// `pods`, a node name for `pods`.
    #[test]
    fn ab_rollouts_in_a_cgroup_or_in_pods() {
        let Some(root) = crate::host::system::cgroup2_mount() else {
            eprintln!("skipped: no cgroup2 mount to name in the config");
            return;
        };
        let r = root.display();
        let head = "[algos.ccpd]\n[[rollouts]]\nalgo = \"ccpd\"\n";
        let d = parse(
            Path::new("t.toml"),
            &format!("{head}ab = \"{r}\"\nshare = 0.25\n"),
        )
        .unwrap();
        let o = &d.rollouts[0];
        assert_eq!((&o.canary, &o.control), (&root, &root));
        assert_eq!(o.ab_share, Some(250_000));
        let d = parse(Path::new("t.toml"), &format!("{head}ab = \"{r}\"\n")).unwrap();
        assert_eq!(
            d.rollouts[0].ab_share,
            Some(100_000),
            "the CLI's default share"
        );
        let pods = format!(
            "{head}pods = \"app=web\"\nnamespace = \"shop\"\nshare = 0.5\n[serve]\nnode_name = \"n1\"\n"
        );
        let d = parse(Path::new("t.toml"), &pods).unwrap();
        assert!(d.rollouts.is_empty());
        assert_eq!(d.pod_rollouts.len(), 1);
        assert_eq!(d.pod_rollouts[0].namespace.as_deref(), Some("shop"));
        assert_eq!(d.pod_rollouts[0].opts.ab_share, Some(500_000));
        // Expanded per pod whose cgroup exists: a pod of the selector
        // and namespace at a cgroup that is there (the cgroupfs driver's
        // tree under a scratch root), another namespace's, a missing one.
        let tmp = std::env::temp_dir().join(format!("ccl-podab-{}", std::process::id()));
        let mut dd = d.clone();
        dd.serve.cgroup_root = tmp.clone();
        dd.serve.cgroup_driver = Some(crate::bind::pods::Driver::Cgroupfs);
        let pod = |uid: &str, ns: &str| crate::bind::pods::PodInfo {
            uid: uid.into(),
            namespace: ns.into(),
            labels: [("app".to_string(), "web".to_string())].into(),
            qos: Some(crate::bind::pods::Qos::Guaranteed),
        };
        let list = [pod("u1", "shop"), pod("u2", "other"), pod("u3", "shop")];
        let cg = crate::bind::pods::pod_cgroup(
            &tmp,
            crate::bind::pods::Driver::Cgroupfs,
            "u1",
            crate::bind::pods::Qos::Guaranteed,
        );
        std::fs::create_dir_all(&cg).unwrap();
        let e = with_pods(&dd, Some(&list));
        let _ = std::fs::remove_dir_all(&tmp);
        assert_eq!(e.rollouts.len(), 1, "{:?}", e.rollouts);
        assert_eq!((&e.rollouts[0].canary, &e.rollouts[0].control), (&cg, &cg));
        assert_eq!(e.rollouts[0].ab_share, Some(500_000));

        for (text, want) in [
            (
                format!("{head}ab = \"{r}\"\ncanary = \"{r}\"\n"),
                "exactly one",
            ),
            (head.to_string(), "exactly one"),
            (format!("{head}ab = \"{r}\"\nshare = 1.0\n"), "inside 0..1"),
            (format!("{head}ab = \"{r}\"\nshare = 0\n"), "inside 0..1"),
            (
                format!("{head}canary = \"{r}\"\ncontrol = \"{r}\"\nshare = 0.5\n"),
                "A/B rollouts",
            ),
            (format!("{head}canary = \"{r}\"\n"), "needs a `control`"),
            (
                format!("{head}ab = \"{r}\"\nnamespace = \"x\"\n"),
                "goes with `pods`",
            ),
            (
                format!("{head}pods = \"app in web\"\n[serve]\nnode_name = \"n1\"\n"),
                "t.toml:4:8:",
            ),
            (
                format!("{head}ab = \"{r}/ccl-nonexistent-y\"\n"),
                "t.toml:4:6:",
            ),
        ] {
            let e = err(&text);
            assert!(e.contains(want), "{text}: {e}");
        }
        if std::env::var_os("NODE_NAME").is_none() {
            let e = err(&format!("{head}pods = \"app=web\"\n"));
            assert!(e.contains("node's name"), "{e}");
        }
    }

    #[test]
    fn profiles_get_ids_in_name_order_with_their_tunables() {
        let d = parse(
            Path::new("t.toml"),
            "[algos.ccpd]\nset = { kp = 4 }\n[profiles.zz]\nalgo = \"ccpd\"\nset = { kd = 0 }\n\
             [profiles.aa]\nalgo = \"ccpd\"\nset = { kp = 8 }\n",
        )
        .unwrap();
        let p = &d.algos[&Algo::Ccpd];
        assert_eq!(p[&0].get("kp"), Some(4 * 1024));
        assert_eq!(d.profile_names[&(Algo::Ccpd, 1)], "aa");
        assert_eq!(p[&1].get("kp"), Some(8 * 1024));
        assert_eq!(d.profile_names[&(Algo::Ccpd, 2)], "zz");
        assert_eq!(p[&2].get("kd"), Some(0));
        assert!(!d.serve.remove_on_exit);
        assert_eq!(d.serve.metrics, "127.0.0.1:9464");
    }

    /// `rules` of a `[[cgroups]]` entry: parsed in order, a profile by the
    /// config's name or by id, the entry's CC rules for them too (ours in
    /// [algos], or a kernel CC); a bad rule, a profile of another
    /// controller and overlapping prefixes each point at their line.
    #[test]
    fn cgroup_entries_carry_path_rules() {
        let Some(root) = crate::host::system::cgroup2_mount() else {
            eprintln!("skipped: no cgroup2 mount to name in the config");
            return;
        };
        let base = format!(
            "[algos.ccpd]\n[profiles.wan]\nalgo = \"ccpd\"\n[[cgroups]]\npath = \"{}/ccl-nonexistent-x\"\nalgo = \"ccpd\"\n",
            root.display()
        );
        let d = parse(
            Path::new("t.toml"),
            &format!("{base}rules = [\"dst 10.0.0.0/8 -> reno\", \"rtt >= 5ms -> ccpd/wan\", \"rtt < 1ms -> ccpd/3\"]\n"),
        )
        .unwrap();
        let r = &d.cgroups[0].path_rules;
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].to_string(), "dst 10.0.0.0/8 -> reno");
        assert_eq!((r[1].cc.as_str(), r[1].profile), ("ccpd", 1));
        assert_eq!(r[2].profile, 3);
        for (rule, line_col, want) in [
            ("dst 10.0.0.0/33 -> reno", "t.toml:7:10:", "not a prefix"),
            ("rtt >= 5ms -> hetcp", "t.toml:7:10:", "not in [algos]"),
            (
                "rtt >= 5ms -> ccpd/nope",
                "t.toml:7:10:",
                "unknown profile `nope`",
            ),
            ("rtt >= 5ms -> reno/wan", "t.toml:7:10:", "kernel CC"),
        ] {
            let e = err(&format!("{base}rules = [\"{rule}\"]\n"));
            assert!(e.starts_with(line_col) && e.contains(want), "{rule}: {e}");
        }
        let e = err(&format!(
            "{base}rules = [\"dst 10.0.0.0/8 -> reno\", \"dst 10.9.0.0/16 -> ccpd\"]\n"
        ));
        assert!(
            e.starts_with("t.toml:7:10:") && e.contains("overlap"),
            "{e}"
        );
    }

    /// Files named a.toml, b.toml, ... with these texts, as one config.
    fn parse_files(texts: &[&str]) -> Result<Desired, String> {
        let srcs: Vec<Source> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| Source {
                path: format!("{}.toml", (b'a' + i as u8) as char).into(),
                text: t.to_string(),
            })
            .collect();
        parse_all(&srcs).map_err(|e| format!("{e:#}"))
    }

    /// Several files are one config: a later file's profile and entries
    /// use an earlier file's controllers (and the other way round), the
    /// lists join in file order, and the profile ids run on across files;
    /// a table set in two files, a second [serve] or default_cc, and an
    /// error inside a later file each name their file.
    #[test]
    fn several_files_are_one_config() {
        let fleet = "[algos.ccpd]\nset = { kp = 4 }\n[profiles.zz]\nalgo = \"ccpd\"\n";
        let pool = "[profiles.aa]\nalgo = \"ccpd\"\nset = { kd = 0 }\n\
                    [[pods]]\nselector = \"app=web\"\nalgo = \"ccpd\"\nprofile = \"aa\"\n\
                    [serve]\nmetrics = \"0.0.0.0:9464\"\nnode_name = \"n1\"\non_exit = \"remove\"\n";
        let d = parse_files(&[fleet, pool]).unwrap();
        assert_eq!(d.algos[&Algo::Ccpd][&0].get("kp"), Some(4 * 1024));
        assert_eq!(d.profile_names[&(Algo::Ccpd, 1)], "zz");
        assert_eq!(d.profile_names[&(Algo::Ccpd, 2)], "aa");
        assert_eq!(d.algos[&Algo::Ccpd][&2].get("kd"), Some(0));
        assert_eq!((d.pods[0].cc.as_str(), d.pods[0].profile), ("ccpd", 2));
        assert_eq!(d.serve.metrics, "0.0.0.0:9464");
        assert!(d.serve.remove_on_exit);
        // The pool's file first: its entries still find the fleet's ccpd
        // (ids in file order; `apply` and `serve` make them stable).
        let d2 = parse_files(&[pool, fleet]).unwrap();
        assert_eq!(d2.profile_names[&(Algo::Ccpd, d2.pods[0].profile)], "aa");
        assert_eq!(d2.serve, d.serve);

        let e = parse_files(&[fleet, "\n[algos.ccpd]\nset = { kp = 2 }\n"]).unwrap_err();
        assert!(
            e.starts_with("b.toml:2:8:") && e.contains("set in a.toml too"),
            "{e}"
        );
        let e = parse_files(&[fleet, "[profiles.zz]\nalgo = \"ccpd\"\n"]).unwrap_err();
        assert!(
            e.starts_with("b.toml:1:11:") && e.contains("[profiles.zz] is set in a.toml"),
            "{e}"
        );
        let e = parse_files(&["[serve]\n", fleet, "[serve]\n"]).unwrap_err();
        assert!(e.starts_with("c.toml: [serve] is set in a.toml too"), "{e}");
        let e = parse_files(&["default_cc = \"cubic\"\n", "default_cc = \"reno\"\n"]).unwrap_err();
        assert!(e.starts_with("b.toml: default_cc is set in a.toml"), "{e}");
        // Every file is read against the schema before any is resolved.
        let e = parse_files(&[fleet, "[algos.ccpd]\n", "x = 1\n"]).unwrap_err();
        assert!(e.starts_with("c.toml:1:1: unknown field `x`"), "{e}");
        let e = parse_files(&[fleet, "\n\nbogus = 1\n"]).unwrap_err();
        assert!(e.starts_with("b.toml:3:1:") && e.contains("bogus"), "{e}");
        let e = parse_files(&[
            fleet,
            "[[pods]]\nselector = \"a=b\"\nalgo = \"hetcp\"\n[serve]\nnode_name = \"n\"\n",
        ])
        .unwrap_err();
        assert!(
            e.starts_with("b.toml:3:8:") && e.contains("not in [algos]"),
            "{e}"
        );
        assert!(parse_files(&[]).unwrap_err().contains("no config file"));
    }

    #[test]
    fn shipped_example_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                let text = std::fs::read_to_string(&p).unwrap();
                // cgroup paths exist only where the config is deployed: check
                // the syntax and tunables with the [[cgroups]] left out.
                let cut = text.split("[[cgroups]]").next().unwrap();
                parse(&p, cut).unwrap_or_else(|e| panic!("{e:#}"));
                n += 1;
            }
        }
        assert!(n >= 2, "web server and bulk host examples");
    }
}
