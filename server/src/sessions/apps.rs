//! The apps as sessions use them: an app's configuration read once into what the
//! launch, the watcher and the proxy ask of it (its protocol, how it is known to be
//! ready, where the browser lands), and a user's form values checked against its
//! fields before anything is expanded: each value bounded, typed and turned into the
//! one variable the server reads it from (`ATRIUM_FIELD_<NAME>`).
//!
//! Owns: [`App`], [`Protocol`], [`Ready`], the checking of field values.
//! Must not touch: processes, the database, HTTP types; the script's text is
//! `script`'s.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{invalid, SessionError};
use crate::config::{AppConfig, FieldConfig, APP_ICONS};

/// Most field values a request may carry, and the longest value read at all.
pub const MAX_VALUES: usize = 32;
/// (A text field takes at most 1,024 characters, up to four bytes each.)
pub const MAX_VALUE_BYTES: usize = 4096;

/// What an app's server speaks beyond HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// A Jupyter Server: its token in `JUPYTER_TOKEN`, kernels' activity counts, the
    /// proof extension on a compute node.
    Jupyter,
    /// TensorBoard through atrium's unix-socket launcher.
    Tensorboard,
    /// Any other HTTP server.
    Http,
}

/// How the portal knows the server is ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ready {
    /// Its socket accepts a connection.
    Socket,
    /// This path under its base URL answers 2xx or 3xx.
    Path(String),
}

/// An app, as sessions use it.
#[derive(Debug, Clone)]
pub struct App {
    pub config: AppConfig,
    pub protocol: Protocol,
}

/// What a list of apps shows of each (the start form's tiles, the dashboard).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AppSummary {
    pub id: String,
    pub title: String,
    pub description: String,
    /// The icon's address (`/static/icons/apps/jupyter.svg`).
    pub icon: String,
}

impl App {
    pub fn new(config: AppConfig) -> App {
        let protocol = match config.protocol.as_str() {
            "jupyter" => Protocol::Jupyter,
            "tensorboard" => Protocol::Tensorboard,
            _ => Protocol::Http,
        };
        App { config, protocol }
    }

    pub fn id(&self) -> &str {
        &self.config.id
    }

    pub fn summary(&self) -> AppSummary {
        AppSummary {
            id: self.config.id.clone(),
            title: self.config.title.clone(),
            description: self.config.description.clone(),
            icon: self.icon_url(),
        }
    }

    /// The icon's address: a built-in's, or the configured path under `/static/`.
    pub fn icon_url(&self) -> String {
        let icon = self.config.icon.as_str();
        if APP_ICONS.contains(&icon) {
            format!("/static/icons/apps/{icon}.svg")
        } else if icon.starts_with("/static/") {
            icon.to_string()
        } else {
            "/static/icons/apps/app.svg".into()
        }
    }

    /// Where the browser lands, relative to the session's prefix.
    pub fn landing(&self) -> &str {
        self.config.landing.trim_start_matches('/')
    }

    pub fn ready(&self) -> Ready {
        match self.config.ready.trim() {
            "socket" => Ready::Socket,
            path => Ready::Path(path.trim_start_matches('/').to_string()),
        }
    }

    /// Whether it may run in the environment `name`.
    pub fn offers(&self, name: &str) -> bool {
        self.config.environments.is_empty() || self.config.environments.iter().any(|e| e == name)
    }

    /// The kernelspecs it offers in an environment that has `environment` (empty:
    /// every one installed).
    pub fn kernels(&self, environment: &[String]) -> Vec<String> {
        match (self.config.kernels.is_empty(), environment.is_empty()) {
            (true, _) => environment.to_vec(),
            (false, true) => self.config.kernels.clone(),
            (false, false) => environment
                .iter()
                .filter(|k| self.config.kernels.contains(k))
                .cloned()
                .collect(),
        }
    }

    /// The user's values for its fields, checked, as the variables the server reads:
    /// a name that is not a field, a value too long, out of bounds or not among the
    /// options is refused naming the field; a field not given takes its default.
    pub fn values(
        &self,
        given: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, SessionError> {
        if given.len() > MAX_VALUES {
            return Err(invalid("fields", format!("at most {MAX_VALUES} values")));
        }
        for (name, value) in given {
            if !self.config.fields.iter().any(|f| &f.name == name) {
                return Err(invalid(
                    "fields",
                    format!(
                        "{:?} is not a field of {}",
                        truncated(name),
                        self.config.title
                    ),
                ));
            }
            if value.len() > MAX_VALUE_BYTES {
                return Err(invalid("fields", format!("{name}: too long")));
            }
        }
        self.config
            .fields
            .iter()
            .map(|f| {
                let value = field_value(f, given.get(&f.name).map(String::as_str))
                    .map_err(|m| invalid("fields", format!("{}: {m}", f.name)))?;
                Ok((f.variable(), value))
            })
            .collect()
    }
}

/// At most 40 characters of a name, for a message.
fn truncated(s: &str) -> String {
    s.chars().take(40).collect()
}

/// One field's value: `given` (or its default) checked against its kind.
fn field_value(f: &FieldConfig, given: Option<&str>) -> Result<String, String> {
    let given = given
        .map(str::to_string)
        .unwrap_or_else(|| match f.kind.as_str() {
            // A form sends nothing for a checkbox left unticked.
            "checkbox" if f.default.is_none() => "false".into(),
            _ => f.default_text(),
        });
    match f.kind.as_str() {
        "number" => {
            let text = given.trim();
            if text.is_empty() {
                return if f.required {
                    Err("a number is needed".into())
                } else {
                    Ok(String::new())
                };
            }
            let n: f64 = text
                .parse()
                .ok()
                .filter(|n: &f64| n.is_finite())
                .ok_or_else(|| format!("{:?} is not a number", truncated(text)))?;
            if f.integer && n.fract() != 0.0 {
                return Err("must be a whole number".into());
            }
            if let Some(min) = f.min.filter(|min| n < *min) {
                return Err(format!("must be at least {min}"));
            }
            if let Some(max) = f.max.filter(|max| n > *max) {
                return Err(format!("must be at most {max}"));
            }
            Ok(if f.integer {
                format!("{}", n as i64)
            } else {
                n.to_string()
            })
        }
        "select" => {
            if f.options.contains(&given) {
                Ok(given)
            } else {
                Err(format!(
                    "{:?} is not one of {}",
                    truncated(&given),
                    f.options.join(", ")
                ))
            }
        }
        "checkbox" => match given.as_str() {
            "true" | "on" | "1" | "yes" => Ok("true".into()),
            "false" | "off" | "0" | "no" | "" => Ok("false".into()),
            other => Err(format!("{:?} is not true or false", truncated(other))),
        },
        _ => {
            if given.chars().count() > f.max_length() {
                return Err(format!("at most {} characters", f.max_length()));
            }
            if given.chars().any(char::is_control) {
                return Err("must not hold control characters".into());
            }
            if f.required && given.trim().is_empty() {
                return Err("a value is needed".into());
            }
            Ok(given)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(fields: &str) -> App {
        let text = format!(
            "id = \"x\"\ntitle = \"X\"\nicon = \"app\"\nprotocol = \"http\"\nready = \"socket\"\n\
             command = [\"srv\", \"{{socket}}\"]\n{fields}"
        );
        App::new(toml::from_str(&text).expect("app"))
    }

    fn given(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn refused(a: &App, pairs: &[(&str, &str)]) -> String {
        match a.values(&given(pairs)) {
            Err(SessionError::Invalid { field, message }) => format!("{field}: {message}"),
            other => panic!("accepted: {other:?}"),
        }
    }

    #[test]
    fn values_are_checked_against_their_fields_and_defaults_fill_the_rest() {
        let a = app(r#"
[[fields]]
name = "cores"
kind = "number"
min = 1
max = 8
integer = true
default = 2
[[fields]]
name = "version"
kind = "select"
options = ["4.3", "4.4"]
[[fields]]
name = "folder"
kind = "text"
max_length = 10
[[fields]]
name = "dark"
kind = "checkbox"
"#);
        let values = a.values(&given(&[("cores", "4")])).expect("values");
        assert_eq!(
            values,
            [
                ("ATRIUM_FIELD_CORES".to_string(), "4".to_string()),
                ("ATRIUM_FIELD_VERSION".into(), "4.3".into()),
                ("ATRIUM_FIELD_FOLDER".into(), "".into()),
                ("ATRIUM_FIELD_DARK".into(), "false".into()),
            ]
        );
        let values = a
            .values(&given(&[("dark", "on"), ("version", "4.4")]))
            .expect("values");
        assert_eq!(values[0].1, "2");
        assert_eq!(values[1].1, "4.4");
        assert_eq!(values[3].1, "true");
        assert_eq!(
            refused(&a, &[("cores", "9")]),
            "fields: cores: must be at most 8"
        );
        assert_eq!(
            refused(&a, &[("cores", "1.5")]),
            "fields: cores: must be a whole number"
        );
        assert!(refused(&a, &[("cores", "NaN")]).contains("is not a number"));
        assert!(refused(&a, &[("version", "5; rm -rf /")]).starts_with("fields: version:"));
        assert!(refused(&a, &[("folder", "01234567890")]).contains("at most 10 characters"));
        assert!(refused(&a, &[("folder", "a\nb")]).contains("control characters"));
        assert!(refused(&a, &[("dark", "maybe")]).contains("not true or false"));
        assert!(refused(&a, &[("bogus", "1")]).contains("is not a field of X"));
        let long = "x".repeat(MAX_VALUE_BYTES + 1);
        assert!(refused(&a, &[("folder", &long)]).contains("too long"));
    }

    #[test]
    fn hostile_text_stays_a_value() {
        let a = app("[[fields]]\nname = \"t\"\nkind = \"text\"\n");
        let hostile = "$(id) `id` '\"; rm -rf ~ {socket}";
        let values = a.values(&given(&[("t", hostile)])).expect("values");
        assert_eq!(
            values,
            [("ATRIUM_FIELD_T".to_string(), hostile.to_string())]
        );
    }

    #[test]
    fn kernels_offered_are_the_environments_the_app_keeps() {
        let mut a = app("");
        let env = vec!["python3".to_string(), "ir".to_string()];
        assert_eq!(a.kernels(&env), env);
        a.config.kernels = vec!["ir".into(), "julia".into()];
        assert_eq!(a.kernels(&env), ["ir"]);
        assert_eq!(a.kernels(&[]), ["ir", "julia"]);
    }

    #[test]
    fn icons_landing_and_readiness() {
        let mut a = app("");
        assert_eq!(a.icon_url(), "/static/icons/apps/app.svg");
        a.config.icon = "/static/site/rstudio.svg".into();
        assert_eq!(a.icon_url(), "/static/site/rstudio.svg");
        assert_eq!(a.ready(), Ready::Socket);
        a.config.ready = "/api/status".into();
        assert_eq!(a.ready(), Ready::Path("api/status".into()));
        a.config.landing = "/".into();
        assert_eq!(a.landing(), "");
    }
}
