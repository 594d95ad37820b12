//! The command line: `serve`, `syncer`, `health`, `metadata`, `cluster`, `search`,
//! `version`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::app::{Application, Mode};
use crate::config::{self, LogFormat, Overrides};
use crate::{api_cmd, health_cmd, metadata_cmd, shutdown, telemetry};

/// Exit status of a config error (and of a command-line error, as clap does).
pub const EXIT_CONFIG: u8 = 2;

/// How long the process waits, once stopped, for blocking work still running.
const EXIT_WAIT: Duration = Duration::from_millis(500);

#[derive(Debug, Parser)]
#[command(
    name = "karpor",
    version,
    about = "Multi-cluster Kubernetes resource explorer"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
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
pub(crate) struct ServerArgs {
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
pub(crate) enum ClusterCommand {
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
pub(crate) struct SearchArgs {
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
enum MetadataCommand {
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
struct CommonArgs {
    /// The config file (default `config/karpor.yaml`, else the built-in embedded default).
    #[arg(long, short = 'c', env = "KARPOR_CONFIG")]
    config: Option<PathBuf>,
    /// Listen address, over `server.listen` (or `syncer.probe_listen` for `syncer`).
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// Log filter, over `log.level`.
    #[arg(long)]
    log_level: Option<String>,
    /// Log format, over `log.format`.
    #[arg(long, value_enum)]
    log_format: Option<LogFormatArg>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum LogFormatArg {
    Text,
    Json,
}

#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
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

pub fn run() -> ExitCode {
    // Every file karpor makes (databases, keys, tokens, exports) is its user's alone.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("karpor {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Health(args) => match runtime() {
            Ok(rt) => rt.block_on(health_cmd::run(&args)),
            Err(code) => code,
        },
        Command::Metadata { command } => run_metadata(command),
        Command::Cluster { server, command } => match runtime() {
            Ok(rt) => rt.block_on(api_cmd::cluster(&server, &command)),
            Err(code) => code,
        },
        Command::Search(args) => match runtime() {
            Ok(rt) => rt.block_on(api_cmd::search(&args)),
            Err(code) => code,
        },
        Command::Serve(args) => run_app(&args, Mode::Serve),
        Command::Syncer(args) => run_app(&args, Mode::Syncer),
    }
}

fn run_metadata(command: MetadataCommand) -> ExitCode {
    let common = match &command {
        MetadataCommand::Export { common, .. } | MetadataCommand::Import { common, .. } => common,
    };
    let (config, _) = match config::load(common.config.as_deref(), &overrides(common)) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("karpor: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        match &command {
            MetadataCommand::Export { output, force, .. } => {
                metadata_cmd::export(&config, output.as_deref(), *force).await
            }
            MetadataCommand::Import { input, .. } => {
                metadata_cmd::import(&config, input.as_ref()).await
            }
        }
    })
}

fn overrides(args: &CommonArgs) -> Overrides {
    Overrides {
        listen: None,
        log_level: args.log_level.clone(),
        log_format: args.log_format.map(|f| match f {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        }),
    }
}

fn run_app(args: &CommonArgs, mode: Mode) -> ExitCode {
    let mut overrides = overrides(args);
    if mode == Mode::Serve {
        overrides.listen = args.listen;
    }
    // Everything about the config is settled before anything starts or binds.
    let (mut config, file) = match config::load(args.config.as_deref(), &overrides) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("karpor: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if mode == Mode::Syncer {
        if let Some(listen) = args.listen {
            config.syncer.probe_listen = listen;
        }
    }
    telemetry::init(&config.log);
    raise_open_files_limit();
    match &file {
        Some(path) => tracing::info!(config = %path.display(), "config loaded"),
        None => tracing::info!("no config file: using the built-in embedded default"),
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = rt.block_on(async {
        let app = Application::build(config, mode).await?;
        app.run_until_stopped(shutdown::signal()).await
    });
    // Blocking work still running (a parse, a name lookup) must not hold the exit: the
    // runtime waits for it only this long.
    rt.shutdown_timeout(EXIT_WAIT);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "karpor stopped with an error");
            eprintln!("karpor: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Every connection is a file descriptor, and a probe storm or many watched clusters
/// outgrow the usual soft limit (1024) long before the hard one; raised as Go's runtime
/// does.
fn raise_open_files_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => tracing::debug!(limit, "open files limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open files limit"),
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("karpor: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        })
}
