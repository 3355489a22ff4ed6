//! Reusable model definitions, their weights named as the files that carry them name them.

pub mod bert;
pub mod gpt;
pub mod llama;

use std::path::PathBuf;

/// Where model `name` lives: the folder `env_var` names, else `<cache>/models/<name>`, where
/// `tools/setup.sh --models` puts it.
pub fn model_dir(name: &str, env_var: &str) -> PathBuf {
    crate::helpers::getenv_str(env_var)
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::helpers::cache::cache_dir().join("models").join(name))
}
