//! The confinement of a project run's tools (`weft run`, `weft resume`): the project's rules
//! (`Project::confinement`) for the store in use, with the sandbox announced when it is off
//! or cannot be set up.

use weft_standard::Project;
use weft_store::StoreUrl;
use weft_tools::{Confinement, Mode};

/// The confinement of a run of `project` with the store at `store` and `--sandbox` `mode`.
pub(crate) fn for_run(project: &Project, store: &StoreUrl, mode: Option<Mode>) -> Confinement {
    let store_path = match store {
        StoreUrl::Sqlite(path) => Some(path.as_path()),
        StoreUrl::Postgres(_) => None,
    };
    let confinement = project.confinement(store_path, mode);
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
    confinement
}
