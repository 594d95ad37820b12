//! The command line's shape (clap): commands, their arguments and help. Only types: what
//! each command does is in `cli.rs` (the process) and the `*_cmd` modules (the clients).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{LogFormat, LogLevel};

#[derive(Debug, Parser)]
#[command(
    name = "karpor",
    version,
    about = "Multi-cluster Kubernetes resource explorer"
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run the server (and the syncer in-process unless `server.syncer: false`).
    Serve(CommonArgs),
    /// Run the syncer alone, with its own probe port (`syncer.probe_listen`).
    Syncer(CommonArgs),
    /// Run an agent inside a member cluster: it syncs that cluster and pushes to the hub,
    /// so the hub holds no credential of it (`agent:`; `--listen` is its probe port).
    Agent(AgentArgs),
    /// Probe a running instance; exit 0 ready, 1 not ready, 2 unreachable.
    Health(HealthArgs),
    /// Export or import the metadata store's records (to switch backends).
    Metadata {
        #[command(subcommand)]
        command: MetadataCommand,
    },
    /// Register, show, change, list or remove clusters through a running server.
    Cluster {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// List, show, apply (create or replace from a YAML file) or remove the relation
    /// rules behind the topology.
    Relation {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: RelationCommand,
    },
    /// Show, apply (create or update from YAML files) or remove sync rules, the
    /// resources of which clusters are synced, through a running server; `--dry-run`
    /// shows what a rule selects first.
    Rule {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: RuleCommand,
    },
    /// Search a running server's resources: SQL (`select * from resources where ...`) or
    /// a keyword.
    Search(SearchArgs),
    /// Audit findings and score of a running server's resources: everything, a cluster,
    /// or a namespace (`CLUSTER/NAMESPACE`).
    Audit(AuditArgs),
    /// One object as kubectl describe shows it: key fields, relations, audit findings and
    /// recent events.
    Describe(DescribeArgs),
    /// The model service's explanation of one object (`CLUSTER/KIND/[NAMESPACE/]NAME`):
    /// its YAML and audit findings, printed as the model writes (needs `ai` on the
    /// server).
    Explain(ExplainArgs),
    /// A pod's log through a running server (`CLUSTER/NAMESPACE/POD`): the last lines, or
    /// with `-f` followed until interrupted.
    Logs(LogsArgs),
    /// An object's revisions as karpor kept them (`CLUSTER/KIND/[NAMESPACE/]NAME`), newest
    /// first: when, what change, who, and what changed from the one before.
    History(HistoryArgs),
    /// What changed in one object, as the lines of its YAML: now against `--since` ago, or
    /// between two of its revisions (`--from RV [--to RV]`).
    Diff(DiffArgs),
    /// What changed where (everything, a cluster, or `CLUSTER/NAMESPACE`) over a window,
    /// newest first, with counts by change type.
    Changes(ChangesArgs),
    /// Serve MCP (the Model Context Protocol) on stdin and stdout for a desktop assistant,
    /// as a client of a running server: its read-only tools, under your token.
    Mcp(McpArgs),
    /// Who the server takes you for (the token's name and role) and what you may do
    /// there.
    Whoami(WhoamiArgs),
    /// Print a shell completion script (`source <(karpor completion bash)`).
    Completion {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the version.
    Version,
}

/// Where the REST API is, and the token to use.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Address of `karpor serve` (`http://` is assumed without a scheme).
    #[arg(
        long,
        global = true,
        env = "KARPOR_SERVER",
        default_value = DEFAULT_SERVER,
        visible_alias = "url"
    )]
    pub server: String,
    /// Bearer token (an `auth.tokens` entry of the server).
    #[arg(long, global = true, env = "KARPOR_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// File holding the token, when `--token` is not given. Default: a local install's
    /// admin token (`data/admin-token` in this directory), for a server on loopback.
    #[arg(long, global = true, env = "KARPOR_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
}

/// `cluster add --mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AddMode {
    /// Synced by the hub with the kubeconfig (the default without `--mode`).
    Kubeconfig,
    /// Synced by an agent in the cluster.
    Agent,
}

/// Where a local install listens.
pub(crate) const DEFAULT_SERVER: &str = "http://127.0.0.1:7443";

/// How a command prints what it got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum Output {
    /// Aligned columns.
    #[default]
    Table,
    /// More columns.
    Wide,
    /// The API's JSON.
    Json,
    /// The API's JSON, as YAML.
    Yaml,
    /// One `kind/name` a line, for scripts.
    Name,
}

/// `-o FORMAT` (and the older `--json`).
#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Same as `-o json`.
    #[arg(long, hide = true)]
    pub json: bool,
}

impl OutputArgs {
    pub(crate) fn format(&self) -> Output {
        if self.json {
            Output::Json
        } else {
            self.output
        }
    }
}

/// What a cluster is called and described as, and its labels.
#[derive(Debug, Args)]
pub(crate) struct ClusterFields {
    /// The name people see (default: the cluster's name).
    #[arg(long)]
    pub display_name: Option<String>,
    /// A line about the cluster.
    #[arg(long)]
    pub description: Option<String>,
    /// A label, `KEY=VALUE` (repeat for more); sync rules can select clusters by them.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{text:?} is not KEY=VALUE")),
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ClusterCommand {
    /// Register a cluster from a kubeconfig (its current context, or `--context`): files
    /// it names are read here and sent inline; the server checks it can reach the cluster
    /// first.
    Add {
        /// The cluster's name (a DNS-1123 label).
        name: String,
        /// The kubeconfig file (not with `--mode agent`).
        #[arg(long, required_unless_present = "mode")]
        kubeconfig: Option<PathBuf>,
        /// The context to use (default: the kubeconfig's current context).
        #[arg(long)]
        context: Option<String>,
        /// `agent`: an agent inside the cluster syncs it, and the hub holds no credential
        /// of it; prints the agent's install line with a single-use join token.
        #[arg(long, value_enum, conflicts_with_all = ["kubeconfig", "context"])]
        mode: Option<AddMode>,
        #[command(flatten)]
        fields: ClusterFields,
        /// Register it without first checking that its API server answers.
        #[arg(long)]
        no_validate: bool,
        /// Wait until its first sync has settled, showing progress.
        #[arg(long)]
        wait: bool,
        /// How long `--wait` waits.
        #[arg(long, default_value = "10m", value_parser = humantime_serde::re::humantime::parse_duration)]
        wait_timeout: Duration,
    },
    /// Show one cluster.
    Get {
        /// The cluster's name.
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Change a cluster's kubeconfig, context, display name, description or labels.
    Update {
        /// The cluster's name.
        name: String,
        /// A new kubeconfig file.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// The context to use from `--kubeconfig`.
        #[arg(long, requires = "kubeconfig")]
        context: Option<String>,
        #[command(flatten)]
        fields: ClusterFields,
        /// Register the new kubeconfig without first checking that it works.
        #[arg(long)]
        no_validate: bool,
    },
    /// List the registered clusters.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Deregister a cluster (its documents are removed by the syncer).
    Rm {
        /// The cluster's name.
        name: String,
    },
    /// Where a cluster's agent stands: joined, connected, a join waiting for approval.
    Agent {
        /// The cluster's name.
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Let a join held for approval through (`agents.approve_joins`).
    Approve {
        /// The cluster's name.
        name: String,
        /// The key the agent logged (`joining the hub key=sha256:…`).
        #[arg(long)]
        key: String,
    },
    /// Revoke a cluster's agent: its certificates stop working and its session ends; it
    /// joins again only with a new token.
    Revoke {
        /// The cluster's name.
        name: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum RelationCommand {
    /// The rules in force: built-in ones and yours.
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// One rule.
    Get {
        /// The rule's name.
        name: String,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Create or replace the rules of a YAML file (one rule, or a list); a rule named as
    /// a built-in one replaces it.
    Apply {
        /// The YAML file (`-` for stdin).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
    },
    /// Remove a stored rule (a built-in one of its name is back in force).
    Rm {
        /// The rule's name.
        name: String,
    },
}

/// `--dry-run [--cluster NAME]`.
#[derive(Debug, Args)]
pub(crate) struct DryRunArgs {
    /// Store nothing: show the types the rule selects in each cluster and how many
    /// objects each has there now.
    #[arg(long)]
    pub dry_run: bool,
    /// With `--dry-run`: this cluster only (default: every cluster the rule selects).
    #[arg(long, requires = "dry_run")]
    pub cluster: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RuleCommand {
    /// List the sync rules in force (the built-in ones while none is stored).
    List {
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Show one rule (`-o yaml` writes what `apply -f` takes back), stored or built in.
    Get {
        /// The rule's name.
        name: String,
        #[command(flatten)]
        output: OutputArgs,
        #[command(flatten)]
        dry_run: DryRunArgs,
    },
    /// Create or update the rules of a YAML file (several separated by `---`; `-` reads
    /// stdin), as kubectl applies manifests: a rule that did not change is left alone.
    Apply {
        /// The file.
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
        #[command(flatten)]
        dry_run: DryRunArgs,
        #[command(flatten)]
        output: OutputArgs,
    },
    /// Remove a stored rule (with none left, the built-in rules apply again).
    Rm {
        /// The rule's name.
        name: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct SearchArgs {
    /// An SQL query (`select * from resources where ...`), or anything else as a keyword
    /// (a word anywhere in name, namespace, labels or content).
    #[arg(required_unless_present_any = ["keyword", "nl"])]
    pub query: Option<String>,
    /// A question in natural language, which the server's model service turns into a
    /// query (printed on stderr: the query that ran).
    #[arg(long, conflicts_with_all = ["query", "keyword"])]
    pub nl: Option<String>,
    /// Alone: a keyword search. With an SQL query: only results whose name or namespace
    /// holds it, as Karpor's keyword does.
    #[arg(long)]
    pub keyword: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Page, from 1.
    #[arg(long, default_value_t = 1)]
    pub page: u64,
    /// Results per page (1 to 1000).
    #[arg(long, default_value_t = 20)]
    pub page_size: u64,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DescribeArgs {
    /// `CLUSTER/KIND/NAME`, or `CLUSTER/KIND/NAMESPACE/NAME` (`prod/pod/shop/web-1`).
    pub target: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// `yaml` or `json`: the object itself.
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ExplainArgs {
    /// `CLUSTER/KIND/NAME`, or `CLUSTER/KIND/NAMESPACE/NAME` (`prod/pod/shop/web-1`).
    pub target: String,
    /// The answer's language: `en` (default), `zh`, `de`, `pt` or `ko`.
    #[arg(long)]
    pub language: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Args)]
pub(crate) struct HistoryArgs {
    /// `CLUSTER/KIND/NAME`, or `CLUSTER/KIND/NAMESPACE/NAME` (`prod/deployment/shop/web`).
    pub target: String,
    /// The newest this many revisions (1 to 1000).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub limit: u16,
    #[command(flatten)]
    pub server: ServerArgs,
    /// `json` or `yaml`: the API's answer, each revision with its object.
    #[command(flatten)]
    pub output: OutputArgs,
}

/// One of `--since` and `--from` is needed (checked by the command: a required group
/// would show both in the usage line as if each were required).
#[derive(Debug, Args)]
pub(crate) struct DiffArgs {
    /// `CLUSTER/KIND/NAME`, or `CLUSTER/KIND/NAMESPACE/NAME` (`prod/deployment/shop/web`).
    pub target: String,
    /// The object this long ago (`30m`, `2h`) or at this time (RFC 3339), against now.
    #[arg(long, conflicts_with_all = ["from", "to"])]
    pub since: Option<String>,
    /// The revision (its resourceVersion, as `karpor history` shows it) to compare from.
    #[arg(long, value_name = "RV")]
    pub from: Option<String>,
    /// The revision to compare to (default: the newest).
    #[arg(long, value_name = "RV", requires = "from")]
    pub to: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ChangesArgs {
    /// `CLUSTER` or `CLUSTER/NAMESPACE`; every cluster when absent.
    pub scope: Option<String>,
    /// The window's start: how long ago (`30m`, `2h`, `7d`) or a time (RFC 3339); the
    /// server's default is an hour ago.
    #[arg(long)]
    pub since: Option<String>,
    /// The window's end, excluded: how long ago or a time (default: now).
    #[arg(long)]
    pub until: Option<String>,
    /// Only objects of this kind (`Deployment`).
    #[arg(long)]
    pub kind: Option<String>,
    /// Only these change types (comma-separated, or repeated).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub change: Vec<ChangeArg>,
    /// The whole search in the dialect instead:
    /// `select * from changes where namespace = 'shop' and time > now() - interval 1 hour`.
    #[arg(long, conflicts_with_all = ["scope", "since", "until", "kind", "change"])]
    pub query: Option<String>,
    /// Page, from 1.
    #[arg(long, default_value_t = 1)]
    pub page: u64,
    /// Changes per page (1 to 1000).
    #[arg(long, default_value_t = 50)]
    pub page_size: u64,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// A change type to filter changes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ChangeArg {
    Created,
    Updated,
    Deleted,
}

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Debug, Args)]
pub(crate) struct WhoamiArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct LogsArgs {
    /// `CLUSTER/NAMESPACE/POD` (`prod/shop/web-1`).
    pub target: String,
    /// The container (the pod's only one when absent).
    #[arg(short, long)]
    pub container: Option<String>,
    /// Follow the log until interrupted (the server ends a stream after
    /// `server.limits.live.log_stream_for`).
    #[arg(short, long)]
    pub follow: bool,
    /// The last this many lines (default: the whole log, or 1000 with `-f`).
    #[arg(long)]
    pub tail: Option<u32>,
    /// Only lines newer than this long ago (`30s`, `5m`, `1h`).
    #[arg(long)]
    pub since: Option<String>,
    /// Each line with its time, as the cluster says it.
    #[arg(long)]
    pub timestamps: bool,
    /// Print the model service's diagnosis of the newest lines (the server reads them;
    /// default 500, or `--tail`) instead of the lines.
    #[arg(long, conflicts_with_all = ["follow", "timestamps"])]
    pub diagnose: bool,
    /// With `--diagnose`: the answer's language, `en` (default), `zh`, `de`, `pt` or `ko`.
    #[arg(long, requires = "diagnose")]
    pub language: Option<String>,
    #[command(flatten)]
    pub server: ServerArgs,
}

/// A severity to filter findings by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SeverityArg {
    High,
    Medium,
    Low,
}

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// `CLUSTER` or `CLUSTER/NAMESPACE`; every cluster when absent.
    pub scope: Option<String>,
    /// Only findings of this severity.
    #[arg(long, value_enum)]
    pub severity: Option<SeverityArg>,
    #[command(flatten)]
    pub server: ServerArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum MetadataCommand {
    /// Write every cluster and rule, with credentials, as JSON (to stdout or `--output`).
    Export {
        #[command(flatten)]
        common: CommonArgs,
        /// File to write: created readable by its owner only; an existing file is
        /// refused unless `--force`.
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// Replace an existing output file (atomically; a symlink is replaced, not
        /// followed).
        #[arg(long)]
        force: bool,
    },
    /// Create the records of an export in the configured backend.
    Import {
        #[command(flatten)]
        common: CommonArgs,
        /// The export file (stdin when absent).
        #[arg(long, short = 'i')]
        input: Option<PathBuf>,
        /// What to do with a record whose name already exists.
        #[arg(long, value_enum, default_value_t = OnConflict::Fail)]
        on_conflict: OnConflict,
    },
}

/// `metadata import --on-conflict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnConflict {
    /// Stop at the first record that exists (records before it stay written).
    Fail,
    /// Keep the existing record.
    Skip,
    /// Replace the existing record with the imported one.
    Overwrite,
}

/// Flags shared by the commands that read the config.
#[derive(Debug, Args)]
pub(crate) struct CommonArgs {
    /// The config file (default `config/karpor.yaml`, else the built-in embedded default).
    #[arg(long, short = 'c', env = "KARPOR_CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen address, over `server.listen` (or `syncer.probe_listen` for `syncer`).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// Log level of karpor's own lines, over `log.level` (`RUST_LOG` filters every
    /// library too).
    #[arg(long, value_enum)]
    pub log_level: Option<LogLevel>,
    /// Log format, over `log.format`.
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// Once listening, write the bound address (`host:port`) to this file: what a script
    /// or test that asked for port 0 needs to know.
    #[arg(long)]
    pub address_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct AgentArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The hub's agent listener (`https://HOST:PORT`), over `agent.hub`.
    #[arg(long)]
    pub hub: Option<String>,
    /// The hub's pin (`sha256:HEX`), over `agent.pin`.
    #[arg(long)]
    pub pin: Option<String>,
    /// The member cluster's kubeconfig, over `agent.kubeconfig` (default: the pod's own
    /// ServiceAccount).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where the agent keeps its key and certificate, over `agent.state_file`.
    #[arg(long)]
    pub state_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// Address of the instance (`http://` is assumed without a scheme).
    #[arg(long, env = "KARPOR_SERVER", default_value = DEFAULT_SERVER, visible_alias = "url")]
    pub server: String,
    /// Probe `/livez` instead of `/readyz`.
    #[arg(long, conflicts_with = "readyz")]
    pub livez: bool,
    /// Probe `/readyz` (the default).
    #[arg(long)]
    pub readyz: bool,
    /// One check alone (`Storage`, `Cluster/prod`): it answers for itself.
    #[arg(long)]
    pub check: Option<String>,
    /// Print the IETF JSON form.
    #[arg(long)]
    pub json: bool,
    /// Admin token, for raw failure details with `--check`.
    #[arg(long, env = "KARPOR_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Give up after this long (e.g. `5s`).
    #[arg(long, default_value = "5s", value_parser = humantime_serde::re::humantime::parse_duration)]
    pub timeout: Duration,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every command and argument a user can type, with the path to it.
    fn walk(command: &clap::Command, path: String, out: &mut Vec<(String, clap::Command)>) {
        out.push((path.clone(), command.clone()));
        for sub in command.get_subcommands() {
            walk(sub, format!("{path} {}", sub.get_name()), out);
        }
    }

    #[test]
    fn every_argument_has_help_and_usage_shows_only_required_ones_bare() {
        let mut commands = Vec::new();
        walk(&Cli::command(), "karpor".into(), &mut commands);
        for (path, mut command) in commands {
            if path.ends_with(" help") {
                continue;
            }
            assert!(command.get_about().is_some(), "{path} has no help");
            let usage = command.render_usage().to_string();
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") || arg.is_hide_set() {
                    continue;
                }
                assert!(arg.get_help().is_some(), "{path}: --{id} has no help");
                if let Some(long) = arg.get_long() {
                    // An optional flag lives under [OPTIONS], not in the usage line.
                    let shown = usage.contains(&format!("--{long} "))
                        || usage.ends_with(&format!("--{long}"));
                    assert_eq!(
                        shown,
                        arg.is_required_set(),
                        "{path}: --{long} in `{usage}`"
                    );
                }
            }
        }
    }
}
