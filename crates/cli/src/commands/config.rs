//! `compaction config`: show the settings file, its path, or set one key under the file lock
//! (a spec key through config-ssot, an adapter key checked against the registry).

use std::path::PathBuf;

use clap::Subcommand;

use super::output::emit;
use crate::error::CliError;
use crate::registry::Registry;
use crate::wiring;

#[derive(Debug, clap::Args)]
pub(super) struct ConfigArgs {
    #[command(subcommand)]
    action: ConfigAction,
    /// The config file (default: $ZOTERO_DATA_DIR or ~/Zotero, then zocrates-data/zocrates_config.json).
    #[arg(long, value_name = "PATH", global = true)]
    config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum ConfigAction {
    /// Print the settings file.
    Show,
    /// Print the settings file's path.
    Path,
    /// Set KEY to VALUE under the file lock.
    Set {
        /// A key of the settings file.
        key: String,
        /// The new value (parsed to the key's type).
        value: String,
    },
}

/// Runs `compaction config`.
pub(super) fn run(registry: &Registry, args: ConfigArgs) -> Result<(), CliError> {
    let store = wiring::config_store(args.config)?;
    let mut out = std::io::stdout().lock();
    match args.action {
        ConfigAction::Path => emit(&mut out, &wiring::shown(store.path().file())),
        ConfigAction::Show => {
            let file = store.load().map_err(CliError::config)?;
            emit(&mut out, &format!("# {}", wiring::shown(file.path())))?;
            emit(&mut out, String::from_utf8_lossy(&file.render()).trim_end())
        }
        ConfigAction::Set { key, value } => {
            let file = if compaction_core::KEYS.contains(&key.as_str()) {
                store.set(&key, &value).map_err(CliError::config)?
            } else {
                wiring::set_adapter_key(registry, &store, &key, &value)?
            };
            emit(
                &mut out,
                &format!("{key} set in {}", wiring::shown(file.path())),
            )
        }
    }
}
