//! What `weft run` and `weft resume` say about the sandbox before a run: `sandbox = "none"`
//! is announced, and so is a system where no sandbox can be set up (commands will then be
//! refused). The confinement itself is built by the session (`Project::confinement`, from
//! weft-standard's runner), the same way for a new run and a resumed one.

use weft_standard::Project;
use weft_tools::Mode;

/// Announces the sandbox mode a run of `project` with `--sandbox` `mode` gets, when it is
/// `none` or cannot be set up.
pub(crate) fn announce(project: &Project, mode: Option<Mode>) {
    let confinement = project.confinement(None, mode);
    let sandbox = &confinement.sandbox;
    if sandbox.mode == Mode::None {
        eprintln!(
            "weft: sandbox = \"none\": commands run unconfined, as your user, with your files and the network"
        );
    } else {
        let policy = weft_sandbox::Policy::new(sandbox.mode, project.dir());
        if let Err(error) = weft_sandbox::Sandbox::new(policy).check() {
            eprintln!("weft: warning: {error}");
        }
    }
}
