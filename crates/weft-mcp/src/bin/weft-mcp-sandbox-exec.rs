//! The sandbox helper for weft-mcp's tests: `weft-mcp-sandbox-exec __sandbox-exec REQUEST`.

fn main() {
    weft_sandbox::run_helper_if_requested();
    eprintln!("weft-mcp-sandbox-exec: only runs as `weft-mcp-sandbox-exec __sandbox-exec REQUEST`");
    std::process::exit(2);
}
