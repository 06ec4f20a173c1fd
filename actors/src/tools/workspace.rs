//! The fleet workspace: the directory that file tools and Shell may touch.

use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

/// A path the workspace refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkspaceError {
    /// The path leaves the workspace.
    #[error(
        "path {path:?} is outside the workspace; use a path relative to the workspace root (e.g. `notes/todo.md`)"
    )]
    Outside {
        /// The path as given.
        path: String,
    },
    /// The path is empty or malformed.
    #[error("path {path:?} is not usable: {why}")]
    Invalid {
        /// The path as given.
        path: String,
        /// Why.
        why: &'static str,
    },
}

/// The workspace root (canonical).
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Uses `root`, creating it if needed.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root)?;
        Ok(Self {
            root: root.canonicalize()?,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a path given by the model (relative to the root, or
    /// absolute inside it) to an absolute path inside the workspace.
    /// Symlinks are followed for the part of the path that exists, so a
    /// link pointing out of the workspace is refused too.
    pub fn resolve(&self, given: &str) -> Result<PathBuf, WorkspaceError> {
        if given.trim().is_empty() {
            return Err(WorkspaceError::Invalid {
                path: given.into(),
                why: "it is empty",
            });
        }
        if given.contains('\0') {
            return Err(WorkspaceError::Invalid {
                path: given.into(),
                why: "it contains a NUL byte",
            });
        }
        let p = Path::new(given);
        let joined = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.root.join(p)
        };
        let normal =
            normalize(&joined).ok_or_else(|| WorkspaceError::Outside { path: given.into() })?;
        if !normal.starts_with(&self.root) {
            return Err(WorkspaceError::Outside { path: given.into() });
        }
        // follow symlinks in the existing prefix
        let mut existing = normal.clone();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (existing.file_name(), existing.parent()) {
                (Some(name), Some(parent)) => {
                    rest.push(name.to_owned());
                    existing = parent.to_path_buf();
                }
                _ => break,
            }
        }
        let real = existing
            .canonicalize()
            .map_err(|_| WorkspaceError::Outside { path: given.into() })?;
        if !real.starts_with(&self.root) {
            return Err(WorkspaceError::Outside { path: given.into() });
        }
        let mut out = real;
        for name in rest.into_iter().rev() {
            out.push(name);
        }
        Ok(out)
    }
}

/// Lexical normalisation of `.` and `..`; `None` if `..` climbs past the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn confines_paths() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        assert!(ws.resolve("a/b.txt").unwrap().starts_with(ws.root()));
        assert!(ws.resolve("./a/../b.txt").unwrap().starts_with(ws.root()));
        for bad in ["../x", "/etc/passwd", "a/../../x", ""] {
            assert!(ws.resolve(bad).is_err(), "{bad} should be refused");
        }
        let inside = ws.root().join("ok.txt");
        assert!(ws.resolve(inside.to_str().unwrap()).is_ok());
    }

    #[test]
    fn refuses_symlinks_out() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.root().join("link")).unwrap();
        let err = ws.resolve("link/secret.txt").unwrap_err();
        assert!(matches!(err, WorkspaceError::Outside { .. }));
    }
}
