//! Settings layered key by key over their defaults: the TOML file, then the `DEVICECLOUD_*`
//! variables, then the flags, each later source winning (docs/operations.md, "Settings").
//!
//! Generic over the settings type: its keys are the names it serialises (so a key cannot be
//! known to one source and not to another), and every value is checked by deserialising the
//! whole type once it is set, so a wrong value is refused naming its source, before the next
//! one is read. A variable or a flag is text; each setting reads text as well as the file's own
//! type (`devicecloud_engine::settings::units`).

use std::marker::PhantomData;
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The values set so far, over `T`'s defaults.
pub struct Layers<T> {
    /// Every key of `T`, in its order, and whether it may be unset (its default is unset or it
    /// reads unset).
    keys: Vec<(String, bool)>,
    values: Map<String, Value>,
    settings: PhantomData<T>,
}

impl<T: Serialize + DeserializeOwned + Default> Layers<T> {
    /// Nothing set yet: the defaults.
    pub fn new() -> Layers<T> {
        Layers {
            keys: keys_of(&T::default()),
            values: Map::new(),
            settings: PhantomData,
        }
    }

    /// Sets `key` to `value`, or refuses it naming `source`: an unknown key, or a value the
    /// setting does not read.
    pub fn set(&mut self, key: &str, value: Value, source: &str) -> Result<()> {
        if !self.keys.iter().any(|(k, _)| k == key) {
            let known: Vec<&str> = self.keys().collect();
            bail!("{source}: unknown setting {key}; the settings are {}", known.join(", "));
        }
        let before = self.values.insert(key.to_string(), value);
        if let Err(e) = self.settings() {
            match before {
                Some(before) => self.values.insert(key.to_string(), before),
                None => self.values.remove(key),
            };
            bail!("{source}: {e}");
        }
        Ok(())
    }

    /// Sets every key of the TOML file at `path`, in the file's order.
    pub fn file(&mut self, path: &Path) -> Result<()> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("cannot read settings file {}", path.display()))?;
        let table: toml::Table =
            toml::from_str(&text).with_context(|| format!("invalid settings file {}", path.display()))?;
        for (key, value) in table {
            let value = serde_json::to_value(value).with_context(|| format!("{key} in {}", path.display()))?;
            self.set(&key, value, &format!("{key} in {}", path.display()))?;
        }
        Ok(())
    }

    /// Sets every key whose variable `lookup` finds: `<prefix><KEY>`, the key in capitals. An
    /// empty variable unsets a setting that may be unset, and is ignored otherwise.
    pub fn environment(&mut self, prefix: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<()> {
        for (key, may_unset) in self.keys.clone() {
            let name = format!("{prefix}{}", key.to_ascii_uppercase());
            let Some(text) = lookup(&name) else {
                continue;
            };
            if text.trim().is_empty() {
                if may_unset {
                    self.set(&key, Value::Null, &name)?;
                }
                continue;
            }
            self.set(&key, Value::String(text.clone()), &format!("{name}={text}"))?;
        }
        Ok(())
    }

    /// The keys of `T`, in its order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(|(k, _)| k.as_str())
    }

    /// The settings: the defaults with every value set over them.
    pub fn settings(&self) -> Result<T, serde_json::Error> {
        serde_json::from_value(Value::Object(self.values.clone()))
    }
}

/// The keys `settings` serialises, each with whether it may be unset: an unset default, or a
/// setting that reads an unset value.
pub fn keys_of<T: Serialize + DeserializeOwned>(settings: &T) -> Vec<(String, bool)> {
    let Ok(Value::Object(map)) = serde_json::to_value(settings) else {
        return Vec::new();
    };
    map.into_iter()
        .map(|(key, value)| {
            let mut unset = Map::new();
            unset.insert(key.clone(), Value::Null);
            let may_unset = value.is_null() || serde_json::from_value::<T>(Value::Object(unset)).is_ok();
            (key, may_unset)
        })
        .collect()
}
