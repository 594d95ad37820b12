//! The process: parses the command line (`args.rs`), then runs a server role (`serve`,
//! `syncer`) from its config, or a client command (`health`, `metadata`, `cluster`,
//! `rule`, `search`, `audit`, `history`, ...), and turns the outcome into the exit status.

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::app::{Application, Mode};
use crate::args::{AgentArgs, Cli, Command, CommonArgs, MetadataCommand};
use crate::config::{self, Overrides};
use crate::{client, health_cmd, metadata_cmd, shutdown, telemetry};

/// Exit status of a config error (and of a command-line error, as clap does).
pub const EXIT_CONFIG: u8 = 2;

/// How long the process waits, once stopped, for blocking work still running.
const EXIT_WAIT: Duration = Duration::from_millis(500);

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
            Ok(rt) => rt.block_on(client::cluster::run(&server, &command)),
            Err(code) => code,
        },
        Command::Rule { server, command } => match runtime() {
            Ok(rt) => rt.block_on(client::rule::run(&server, &command)),
            Err(code) => code,
        },
        Command::Search(args) => match runtime() {
            Ok(rt) => rt.block_on(client::search::run(&args)),
            Err(code) => code,
        },
        Command::Describe(args) => match runtime() {
            Ok(rt) => rt.block_on(client::describe::run(&args)),
            Err(code) => code,
        },
        Command::Explain(args) => match runtime() {
            Ok(rt) => rt.block_on(client::explain::run(&args)),
            Err(code) => code,
        },
        Command::History(args) => match runtime() {
            Ok(rt) => rt.block_on(client::history::run(&args)),
            Err(code) => code,
        },
        Command::Diff(args) => match runtime() {
            Ok(rt) => rt.block_on(client::diff::run(&args)),
            Err(code) => code,
        },
        Command::Changes(args) => match runtime() {
            Ok(rt) => rt.block_on(client::changes::run(&args)),
            Err(code) => code,
        },
        Command::Mcp(args) => match runtime() {
            Ok(rt) => rt.block_on(client::mcp::run(&args)),
            Err(code) => code,
        },
        Command::Whoami(args) => match runtime() {
            Ok(rt) => rt.block_on(client::whoami::run(&args)),
            Err(code) => code,
        },
        Command::Logs(args) => match runtime() {
            Ok(rt) => rt.block_on(client::logs::run(&args)),
            Err(code) => code,
        },
        Command::Relation { server, command } => match runtime() {
            Ok(rt) => rt.block_on(client::relation::run(&server, &command)),
            Err(code) => code,
        },
        Command::Audit(args) => match runtime() {
            Ok(rt) => rt.block_on(client::audit::run(&args)),
            Err(code) => code,
        },
        Command::Completion { shell } => {
            let mut command = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut command, "karpor", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Serve(args) => run_app(&args, Mode::Serve),
        Command::Syncer(args) => run_app(&args, Mode::Syncer),
        Command::Agent(args) => run_agent(&args),
    }
}

/// `karpor agent`: the flags over the `agent:` section, checked before anything starts.
fn run_agent(args: &AgentArgs) -> ExitCode {
    let common = &args.common;
    let (mut config, file) = match config::load(common.config.as_deref(), &overrides(common)) {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("karpor: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let agent = &mut config.agent;
    if let Some(hub) = &args.hub {
        hub.clone_into(&mut agent.hub);
    }
    if let Some(pin) = &args.pin {
        pin.clone_into(&mut agent.pin);
    }
    if let Some(path) = &args.kubeconfig {
        agent.kubeconfig = Some(path.clone());
    }
    if let Some(path) = &args.state_file {
        agent.state_file = path.clone();
    }
    if let Some(listen) = common.listen {
        agent.probe_listen = listen;
    }
    if let Err(issue) = agent.validate() {
        let origin = file
            .as_ref()
            .map_or("the command line".to_owned(), |f| f.display().to_string());
        eprintln!("karpor: {origin}: {issue}");
        return ExitCode::from(EXIT_CONFIG);
    }
    telemetry::init(&config.log);
    if let Some(path) = &file {
        tracing::info!(config = %path.display(), "config loaded");
    }
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = rt.block_on(crate::agent_role::run(
        config,
        common.address_file.clone(),
        shutdown::signal(),
    ));
    rt.shutdown_timeout(EXIT_WAIT);
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %format!("{e:#}"), "the agent stopped with an error");
            eprintln!("karpor: {e:#}");
            ExitCode::FAILURE
        }
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
            MetadataCommand::Import {
                input, on_conflict, ..
            } => metadata_cmd::import(&config, input.as_ref(), *on_conflict).await,
        }
    })
}

fn overrides(args: &CommonArgs) -> Overrides {
    Overrides {
        listen: None,
        log_level: args.log_level,
        log_format: args.log_format,
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
    let (rt, serving) = match (runtime(), serving_runtime()) {
        (Ok(rt), Ok(serving)) => (rt, serving),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    let result = rt.block_on(async {
        let app = Application::build(config, mode, args.address_file.clone()).await?;
        app.run_until_stopped(serving.handle(), shutdown::signal())
            .await
    });
    // Blocking work still running (a parse, a name lookup) must not hold the exit: each
    // runtime waits for it only this long.
    serving.shutdown_timeout(EXIT_WAIT);
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

/// Where requests are served (see `Application::run_until_stopped`).
fn serving_runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name("karpor-http")
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("karpor: cannot start the serving runtime: {e}");
            ExitCode::FAILURE
        })
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
