//! The adapters shipped in `harness/adapters/`, addressable by name: `run --host opencode` means the opencode adapter and its expectations file.
//!
//! A name resolves to the adapter's command line and, unless the caller
//! passes `--expectations`, to the adapter's committed expectations file, so
//! a real host's known failures cannot be forgotten on the command line and
//! silently count as new ones. Anything that is not a shipped name is a
//! command line, as before (`./codex` runs a binary called codex).

use std::path::{Path, PathBuf};

use anyhow::bail;

/// One adapter shipped with the harness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShippedHost {
    /// What `--host` accepts.
    pub name: &'static str,
    /// The interpreter that runs the adapter (the adapter itself is a plain script).
    pub interpreter: &'static str,
    /// The adapter script, relative to its folder `harness/adapters/<name>/`.
    pub script: &'static str,
    /// The pinned host version the committed expectations and report are about.
    pub pinned: &'static str,
}

pub const SHIPPED_HOSTS: &[ShippedHost] = &[
    ShippedHost {
        name: "opencode",
        interpreter: "node",
        script: "adapter.mjs",
        pinned: "opencode-ai@1.18.33",
    },
    ShippedHost {
        name: "codex",
        interpreter: "python3",
        script: "adapter.py",
        pinned: "@openai/codex@0.171.0",
    },
    ShippedHost {
        name: "claude-code",
        interpreter: "node",
        script: "adapter.mjs",
        pinned: "@anthropic-ai/claude-code@2.1.332",
    },
    ShippedHost {
        name: "copilot",
        interpreter: "node",
        script: "adapter.mjs",
        pinned: "@github/copilot@1.0.102",
    },
    ShippedHost {
        name: "gemini-cli",
        interpreter: "node",
        script: "adapter.mjs",
        pinned: "@google/gemini-cli@0.61.0",
    },
    ShippedHost {
        name: "qwen-code",
        interpreter: "node",
        script: "adapter.mjs",
        pinned: "@qwen-code/qwen-code@0.24.4",
    },
];

/// What `--host` resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedHost {
    pub command: String,
    /// The adapter's committed expectations file, for a shipped host.
    pub expectations: Option<PathBuf>,
}

/// The shipped host of this name, if it is one.
pub fn shipped(name: &str) -> Option<&'static ShippedHost> {
    SHIPPED_HOSTS.iter().find(|h| h.name == name)
}

/// Resolves `--host`: a shipped name to its adapter under `adapters_dir`, anything else to itself.
pub fn resolve(host: &str, adapters_dir: Option<&Path>) -> anyhow::Result<ResolvedHost> {
    let Some(shipped) = shipped(host) else {
        return Ok(ResolvedHost {
            command: host.to_string(),
            expectations: None,
        });
    };
    let Some(adapters_dir) = adapters_dir else {
        bail!(
            "`--host {}` names the adapter shipped in harness/adapters/{}/, but no `harness/adapters/` directory was found from the current directory upwards; run from a checkout of delegation-harness, or pass the adapter's command line (`--host '{} harness/adapters/{}/{}'`)",
            shipped.name,
            shipped.name,
            shipped.interpreter,
            shipped.name,
            shipped.script
        );
    };
    let folder = adapters_dir.join(shipped.name);
    let script = folder.join(shipped.script);
    if !script.is_file() {
        bail!(
            "`--host {}`: the adapter {} is missing; is {} a delegation-harness checkout?",
            shipped.name,
            script.display(),
            adapters_dir.display()
        );
    }
    let expectations = folder.join("expectations.json");
    Ok(ResolvedHost {
        command: format!(
            "{} {}",
            shipped.interpreter,
            shell_words::quote(&script.to_string_lossy())
        ),
        expectations: expectations.is_file().then_some(expectations),
    })
}

/// Resolves `--host` from the current directory: the shipped adapters are
/// found from there upwards and named relative to it when they are below it,
/// so a report says `harness/adapters/...`, not this machine's checkout path.
pub fn resolve_here(host: &str) -> anyhow::Result<ResolvedHost> {
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let adapters = find_adapters_dir(&cwd)
        .map(|dir| dir.strip_prefix(&cwd).map(Path::to_path_buf).unwrap_or(dir));
    resolve(host, adapters.as_deref())
}

/// The nearest `harness/adapters/` directory from `start` upwards.
pub fn find_adapters_dir(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join("harness").join("adapters"))
        .find(|d| d.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for host in SHIPPED_HOSTS {
            let folder = dir.path().join("harness/adapters").join(host.name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join(host.script), "").unwrap();
        }
        dir
    }

    #[test]
    fn a_shipped_name_resolves_to_its_adapter_and_expectations() {
        let dir = checkout();
        let adapters = dir.path().join("harness/adapters");
        std::fs::write(adapters.join("codex/expectations.json"), "{}").unwrap();
        let codex = resolve("codex", Some(&adapters)).unwrap();
        assert_eq!(
            codex.command,
            format!(
                "python3 {}",
                shell_words::quote(&adapters.join("codex/adapter.py").to_string_lossy())
            )
        );
        assert_eq!(
            codex.expectations,
            Some(adapters.join("codex/expectations.json"))
        );
        // No committed file: no default expectations, rather than a made-up path.
        let opencode = resolve("opencode", Some(&adapters)).unwrap();
        assert!(opencode.command.starts_with("node "));
        assert!(opencode.command.ends_with("opencode/adapter.mjs"));
        assert_eq!(opencode.expectations, None);
        let claude = resolve("claude-code", Some(&adapters)).unwrap();
        assert!(claude.command.starts_with("node "));
        assert!(claude.command.ends_with("claude-code/adapter.mjs"));
        std::fs::write(adapters.join("copilot/expectations.json"), "{}").unwrap();
        let copilot = resolve("copilot", Some(&adapters)).unwrap();
        assert!(copilot.command.starts_with("node "));
        assert!(copilot.command.ends_with("copilot/adapter.mjs"));
        assert_eq!(
            copilot.expectations,
            Some(adapters.join("copilot/expectations.json"))
        );
        let gemini = resolve("gemini-cli", Some(&adapters)).unwrap();
        assert!(gemini.command.starts_with("node "));
        assert!(gemini.command.ends_with("gemini-cli/adapter.mjs"));
        let qwen = resolve("qwen-code", Some(&adapters)).unwrap();
        assert!(qwen.command.starts_with("node "));
        assert!(qwen.command.ends_with("qwen-code/adapter.mjs"));
    }

    #[test]
    fn anything_else_is_a_command_line() {
        let resolved = resolve("./codex --flag", None).unwrap();
        assert_eq!(resolved.command, "./codex --flag");
        assert_eq!(resolved.expectations, None);
    }

    #[test]
    fn a_shipped_name_outside_a_checkout_says_what_to_do() {
        let error = resolve("opencode", None).unwrap_err().to_string();
        assert!(error.contains("harness/adapters/opencode/"), "{error}");
        assert!(
            error.contains("node harness/adapters/opencode/adapter.mjs"),
            "{error}"
        );
        let empty = tempfile::tempdir().unwrap();
        let error = resolve("codex", Some(empty.path()))
            .unwrap_err()
            .to_string();
        assert!(error.contains("adapter.py is missing"), "{error}");
    }

    #[test]
    fn the_adapters_directory_is_found_from_a_subdirectory() {
        let dir = checkout();
        let deep = dir.path().join("harness/adapters/codex");
        assert_eq!(
            find_adapters_dir(&deep),
            Some(dir.path().join("harness/adapters"))
        );
        let elsewhere = tempfile::tempdir().unwrap();
        assert_eq!(find_adapters_dir(elsewhere.path()), None);
    }

    #[test]
    fn an_adapter_path_with_spaces_survives_the_host_command_splitter() {
        let dir = tempfile::tempdir().unwrap();
        let adapters = dir.path().join("my checkout/harness/adapters");
        std::fs::create_dir_all(adapters.join("opencode")).unwrap();
        std::fs::write(adapters.join("opencode/adapter.mjs"), "").unwrap();
        let resolved = resolve("opencode", Some(&adapters)).unwrap();
        let words = shell_words::split(&resolved.command).unwrap();
        assert_eq!(
            words,
            vec![
                "node".to_string(),
                adapters
                    .join("opencode/adapter.mjs")
                    .to_string_lossy()
                    .into_owned()
            ]
        );
    }
}
