//! Taking back what opening a `file:` target laid out, when a command then refuses to run before any I/O: the
//! file ssdlab created is removed, the one it extended truncated back, each only if the path still names that
//! very inode ([`ssdlab_io::laid_out`]). Nothing that ssdlab did not create or extend in this run is touched.

use ssdlab_io::laid_out::LaidOut;

/// What to take back, if anything.
pub struct Undo(Option<LaidOut>);

impl Undo {
    /// Nothing was laid out (any target but a `file:` that was created or extended).
    pub fn none() -> Self {
        Undo(None)
    }

    pub(crate) fn of(laid_out: Option<LaidOut>) -> Self {
        Undo(laid_out)
    }

    /// Takes it back. Only for use before any I/O was issued. A path that no longer names the file is left
    /// alone, and so is an error: the command is already failing with its own message.
    pub fn restore(&self) {
        if let Some(laid_out) = &self.0 {
            let _ = laid_out.undo();
        }
    }
}
