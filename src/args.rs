//! The command line's shape (clap): commands, their arguments and help. Only types: what
//! each command does is in `cli.rs` (the process) and the `*_cmd` modules (the clients).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "karpor",
    version,
    about = "Multi-cluster Kubernetes resource explorer"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (and the syncer in-process unless `server.syncer: false`).
    Serve(CommonArgs),
    /// Run the syncer alone, with its own probe port (`syncer.probe_listen`).
    Syncer(CommonArgs),
    /// Probe a running instance; exit 0 ready, 1 not ready, 2 unreachable.
    Health(HealthArgs),
    /// Export or import the metadata store's records (to switch backends).
    Metadata {
        #[command(subcommand)]
        command: MetadataCommand,
    },
    /// Register, list or remove clusters through a running server's REST API.
    Cluster {
        #[command(flatten)]
        server: ServerArgs,
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Search a running server's resources with SQL (`select * from resources where ...`).
    Search(SearchArgs),
    /// Print the version.
    Version,
}

/// Where the REST API is, and the token to use.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Base URL of `karpor serve`.
    #[arg(
        long,
        global = true,
        env = "KARPOR_SERVER",
        default_value = "http://127.0.0.1:7443"
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

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Register a cluster from a kubeconfig (its current context, or `--context`).
    Add {
        name: String,
        #[arg(long)]
        kubeconfig: PathBuf,
        #[arg(long)]
        context: Option<String>,
        #[arg(long)]
        display_name: Option<String>,
        #[arg(long)]
        description: Option<String>,
    },
    /// List the registered clusters.
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Deregister a cluster (its documents are removed by the syncer).
    Rm { name: String },
}

#[derive(Debug, Args)]
pub struct SearchArgs {
    /// The SQL query.
    pub query: String,
    #[command(flatten)]
    pub server: ServerArgs,
    /// Page, from 1.
    #[arg(long, default_value_t = 1)]
    pub page: u64,
    #[arg(long, default_value_t = 20)]
    pub page_size: u64,
    /// Print the answer's JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum MetadataCommand {
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
    },
}

/// Flags shared by the commands that read the config.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// The config file (default `config/karpor.yaml`, else the built-in embedded default).
    #[arg(long, short = 'c', env = "KARPOR_CONFIG")]
    pub config: Option<PathBuf>,
    /// Listen address, over `server.listen` (or `syncer.probe_listen` for `syncer`).
    #[arg(long)]
    pub listen: Option<std::net::SocketAddr>,
    /// Log filter, over `log.level`.
    #[arg(long)]
    pub log_level: Option<String>,
    /// Log format, over `log.format`.
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormatArg>,
    /// Once listening, write the bound address (`host:port`) to this file: what a script
    /// or test that asked for port 0 needs to know.
    #[arg(long)]
    pub address_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormatArg {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Base URL of the instance.
    #[arg(long, env = "KARPOR_URL", default_value = "http://127.0.0.1:7443")]
    pub url: String,
    /// Probe `/livez` instead of `/readyz`.
    #[arg(long, conflicts_with = "readyz")]
    pub livez: bool,
    /// Probe `/readyz` (the default).
    #[arg(long)]
    pub readyz: bool,
    /// One check alone (`/readyz/NAME`).
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
