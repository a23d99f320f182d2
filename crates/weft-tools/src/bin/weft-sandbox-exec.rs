//! The sandbox helper on its own: `weft-sandbox-exec __sandbox-exec REQUEST_JSON`. The `weft`
//! binary has the same mode built in; this one serves programs that embed Weft's tools.

fn main() {
    weft_sandbox::run_helper_if_requested();
    eprintln!(
        "usage: weft-sandbox-exec {} REQUEST_JSON",
        weft_sandbox::HELPER_ARG
    );
    std::process::exit(2);
}
