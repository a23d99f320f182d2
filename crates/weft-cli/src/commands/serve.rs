//! `weft serve [PROJECT]`: the project's agents over HTTP (crate `weft-server`) — the
//! Vercel AI SDK chat contract, run events, and the web page.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use weft_runtime::budget::Budget;
use weft_server::{Auth, Server, ServerConfig};
use weft_standard::Launch;
use weft_store::Durability;

/// `weft serve` flags.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  weft init demo && weft serve demo            open the printed URL in a browser\n  \
weft serve demo --port 8080 --json             print {\"url\",\"token\",…} for a script\n\n\
The chat API speaks the Vercel AI SDK's UI message stream: point useChat's DefaultChatTransport at \
http://HOST:PORT/api/chat (or /api/agents/NAME/chat) with `Authorization: Bearer TOKEN`. \
Programs use the run API at the server's root, in the LangGraph SDK's shape (get_client(url=…, api_key=TOKEN): \
assistants are the project's agents); its OpenAPI document is at /openapi.json.\n\n\
Security: the server binds to 127.0.0.1 and requires the token it prints (or one made with `weft tokens create`) \
on every request, streams included; --no-auth is refused on any address but loopback. Requests naming another Host, \
or sent by a page of another origin, are refused unless allowed (--allow-host, --allow-origin).\n\n\
Stopping (Ctrl-C, SIGTERM) stops the runs in progress; they end interrupted and go on with `weft resume RUN` or the next server.\n\n\
Exit codes: 0 stopped cleanly, 1 the server failed (the address is taken), 2 usage or definition error."
)]
pub(crate) struct ServeArgs {
    /// The project folder (default: the working directory).
    #[arg(value_name = "PROJECT")]
    project: Option<PathBuf>,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// The port (0: any free port; the URL printed says which).
    #[arg(long, default_value_t = 4111)]
    port: u16,
    /// Serve without a token (only on a loopback address: anyone on this machine can then
    /// run the project's agents).
    #[arg(long)]
    no_auth: bool,
    /// The token callers present (default: a random one, printed). Also read from
    /// WEFT_SERVE_TOKEN.
    #[arg(
        long,
        env = "WEFT_SERVE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// A browser origin allowed to call the API (CORS), e.g. http://localhost:3000
    /// (repeatable).
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
    /// A host name the server answers to besides its address and localhost (repeatable).
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_hosts: Vec<String>,
    /// Most runs one token drives at once.
    #[arg(long, default_value_t = 8, value_name = "N")]
    max_runs: usize,
    /// The model for every prompt, as PROVIDER:MODEL.
    #[arg(long, short = 'm')]
    model: Option<String>,
    /// The store: `sqlite:PATH` or `postgres://…` (default: WEFT_DATABASE_URL, else the
    /// project's `.weft/weft.db`).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    /// How commands are sandboxed: `workspace`, `strict` or `none` (default: weft.toml's
    /// `sandbox`, else `workspace`).
    #[arg(long, value_name = "MODE")]
    sandbox: Option<weft_tools::Mode>,
    /// Stop each run before a model call past this many steps (default: weft.toml's
    /// `[budget] maxSteps`, else 100).
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// Print the server's URL and token as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Runs `weft serve`.
pub(crate) fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let dir = args.project.clone().unwrap_or_else(|| PathBuf::from("."));
    let project = match super::location::load_project(&dir)? {
        Ok(project) => project,
        Err(code) => return Ok(code),
    };
    let addr = SocketAddr::new(args.host, args.port);
    let mut config = ServerConfig::new(addr);
    if args.no_auth {
        if !config.is_loopback() {
            eprintln!(
                "weft: --no-auth is refused on {}: a server on a network address always needs a token",
                args.host
            );
            return Ok(ExitCode::from(2));
        }
        config.auth = Auth::Disabled;
    } else if let Some(token) = &args.token {
        if token.len() < 16 {
            eprintln!("weft: --token must be at least 16 characters");
            return Ok(ExitCode::from(2));
        }
        config.auth = Auth::Token(token.clone());
    }
    config.allowed_origins = args.allow_origins.clone();
    config.allowed_hosts = args.allow_hosts.clone();
    config.limits.runs_per_token = args.max_runs.max(1);
    config.model_check = super::models::local_model_check;
    let mut model = args.model.clone();
    if model.is_none()
        && let Some(agent) = project.default_agent()
        && project
            .prompt(&agent.side_a.prompt)
            .is_some_and(|p| project.model_of(p).is_none())
    {
        let reference = super::models::default_model()?;
        if reference.provider.name == weft_local::NAME {
            weft_local::configure_threads();
        }
        model = Some(reference.to_reference_string());
    }
    let prices = match super::pricing::project_prices(Some(&project)) {
        Ok(prices) => prices,
        Err(message) => {
            eprintln!("weft: {message}");
            return Ok(ExitCode::from(2));
        }
    };
    config.launch = Launch {
        model,
        sandbox: args.sandbox.map(|m| m.as_str().to_owned()),
        durability: Durability::Sync,
        budget: Budget {
            max_steps: args.max_steps,
            ..Budget::default()
        },
        ..Launch::default()
    };
    super::telemetry::start(&project.telemetry().unwrap_or_default());
    let runtime = super::runs::runtime()?;
    let code = runtime.block_on(async move {
        let store_url = super::location::store_url(args.store.as_deref(), Some(project.dir()))?;
        let store = super::location::open_or_create(&store_url).await?;
        let weft = super::run::runtime(store, prices);
        let listener = match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => listener,
            Err(error) => {
                eprintln!("weft: cannot listen on {addr}: {error}");
                return Ok::<_, anyhow::Error>(ExitCode::from(1));
            }
        };
        let bound = listener.local_addr().context("the listener has no address")?;
        let host = match bound.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => "127.0.0.1".to_owned(),
            IpAddr::V6(ip) if ip.is_unspecified() => "[::1]".to_owned(),
            IpAddr::V6(ip) => format!("[{ip}]"),
            IpAddr::V4(ip) => ip.to_string(),
        };
        let base = format!("http://{host}:{}", bound.port());
        let token = match &config.auth {
            Auth::Token(token) => Some(token.clone()),
            Auth::Disabled => None,
        };
        let url = match &token {
            Some(token) => format!("{base}/?token={token}"),
            None => format!("{base}/"),
        };
        if args.json {
            println!(
                "{}",
                serde_json::json!({"url": url, "baseUrl": base, "token": token, "project": project.config().name})
            );
        } else {
            let name = project.config().name.clone().unwrap_or_else(|| "the project".into());
            println!("Weft is serving {name} at {url}");
            println!("  chat API: {base}/api/chat (Vercel AI SDK UI message stream)");
            println!("  run API:  {base}/threads (LangGraph SDK; OpenAPI at {base}/openapi.json); Ctrl-C stops");
        }
        let server = Server::new(config, project, weft);
        // The first Ctrl-C / SIGTERM stops the server gracefully, a second exits at once.
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn(super::signals::stop_on_signals(stop.clone()));
        server
            .serve(listener, stop.cancelled_owned())
            .await
            .context("the server failed")?;
        Ok(ExitCode::SUCCESS)
    })?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(code)
}
