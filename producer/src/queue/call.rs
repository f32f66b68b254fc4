//! How the queue calls its scripts: as functions of one Redis function
//! library (`FCALL`), or by SHA (`EVALSHA`) on a server that has no
//! functions (Redis < 7) or refuses them to this user (an ACL without
//! `FUNCTION`).
//!
//! Why functions: Redis runs a script's whole text on every `EVALSHA`, so
//! each call first remade the closures of every prelude definition the
//! script used, and that was most of a call's server time (the notes'
//! "Redis work per queue operation"). A library's top level runs once,
//! at `FUNCTION LOAD`; an `FCALL` runs only the called function, whose
//! prelude definitions are already made.
//!
//! The library is named for a hash of its code (`compactor_<hash>`, its
//! functions `compactor_<hash>_<script>`), so workers of two builds
//! sharing one Redis during a rolling deploy each call their own code,
//! and loading a library that is already there changes nothing. A server
//! that lost its functions (a restart without persistence, `FUNCTION
//! FLUSH`) answers "Function not found"; the call loads the library and
//! runs again once, as a lost script (`NOSCRIPT`) is reloaded. Both are
//! safe because a script that fails to start changes nothing.
//!
//! On a cluster, `FUNCTION LOAD` goes to every primary (the client routes
//! it so); replicas get it by replication, so a promoted replica has it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use redis::aio::ConnectionLike;
use redis::{Cmd, FromRedisValue, Pipeline, RedisError, RedisResult, Script, ToRedisArgs};

/// The function library every script of a queue belongs to, and whether
/// the server runs it.
pub(super) struct Library {
    /// `FUNCTION LOAD`'s argument: the `#!lua name=…` line, the prelude
    /// once, then one `redis.register_function` per script.
    code: String,
    /// `compactor_<hash>`; each function's name is this, `_`, the script's.
    name: String,
    /// Whether calls go by `FCALL`: true until a load finds the server
    /// without functions.
    functions: AtomicBool,
}

impl Library {
    /// The library of `scripts` (name, source) with `prelude` in front:
    /// each script's source becomes the body of a function of `KEYS` and
    /// `ARGV`, so it reads as it does run by `EVALSHA`.
    pub(super) fn new(prelude: &str, scripts: &[(&str, &str)]) -> Library {
        let mut body = String::with_capacity(prelude.len() + 32 * 1024);
        body.push_str(prelude);
        for (script, source) in scripts {
            body.push_str(&format!(
                "\nredis.register_function('@@_{script}', function(KEYS, ARGV)\n{source}\nend)\n"
            ));
        }
        // The hash of the code with the placeholder in it: the name cannot
        // be part of what it hashes.
        let hash = Script::new(&body).get_hash().to_owned();
        let name = format!("compactor_{}", &hash[..16]);
        let code = format!(
            "#!lua name={name}\n{}",
            body.replace("'@@_", &format!("'{name}_"))
        );
        Library {
            code,
            name,
            functions: AtomicBool::new(true),
        }
    }

    /// Loads the library on the server (on every primary of a cluster).
    /// `false` when the server has no functions or this user may not load
    /// them: calls then go by SHA, and the caller loads the scripts.
    pub(super) async fn load<C: ConnectionLike + Send>(&self, conn: &mut C) -> RedisResult<bool> {
        let loaded: RedisResult<String> = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(&self.code)
            .query_async(conn)
            .await;
        let functions = match loaded {
            Ok(_) => true,
            Err(e) if already_loaded(&e) => true,
            Err(e) if no_functions(&e) => false,
            Err(e) => return Err(e),
        };
        self.functions.store(functions, Ordering::Relaxed);
        Ok(functions)
    }

    /// Whether calls go by `FCALL`.
    pub(super) fn functions(&self) -> bool {
        self.functions.load(Ordering::Relaxed)
    }
}

/// One script of the queue, callable as its library's function or by SHA.
pub(super) struct QueueScript {
    /// The script alone, with the prelude it uses, for `EVALSHA`.
    pub(super) script: Script,
    /// Its function's name in `library`.
    function: String,
    library: Arc<Library>,
}

impl QueueScript {
    pub(super) fn new(name: &str, script: Script, library: Arc<Library>) -> QueueScript {
        QueueScript {
            script,
            function: format!("{}_{name}", library.name),
            library,
        }
    }

    /// Puts this script's code on the server: the library, or where the
    /// server has no functions, this script by SHA. For a call or a
    /// pipeline of calls that found it gone.
    pub(super) async fn load(&self, conn: &mut (impl ConnectionLike + Send)) -> RedisResult<()> {
        if !self.library.load(conn).await? {
            self.script.load_async(conn).await?;
        }
        Ok(())
    }

    /// A call of this script, keys and arguments to follow.
    pub(super) fn prepare_invoke(&self) -> Call<'_> {
        Call {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    /// A call with `key` as its first key.
    pub(super) fn key<T: ToRedisArgs>(&self, key: T) -> Call<'_> {
        let mut call = self.prepare_invoke();
        call.key(key);
        call
    }
}

/// A call of a queue script: its keys and arguments, as `redis`'s
/// `ScriptInvocation`, sent as `FCALL` or `EVALSHA`.
pub(super) struct Call<'a> {
    script: &'a QueueScript,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl Call<'_> {
    pub(super) fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        self.keys.extend(key.to_redis_args());
        self
    }

    pub(super) fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// The command: `FCALL <function>` or `EVALSHA <sha>`, the number of
    /// keys, the keys, the arguments.
    pub(super) fn cmd(&self) -> Cmd {
        let mut cmd = if self.script.library.functions() {
            let mut cmd = redis::cmd("FCALL");
            cmd.arg(&self.script.function);
            cmd
        } else {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.script.get_hash());
            cmd
        };
        cmd.arg(self.keys.len()).arg(&self.keys).arg(&self.args);
        cmd
    }

    /// Adds the call to `pipe` (when the pipeline finds the code gone, see
    /// [`is_missing`], load it with [`QueueScript::load`] and send it again).
    pub(super) fn add_to(&self, pipe: &mut Pipeline) {
        pipe.add_command(self.cmd());
    }

    /// Runs the call. When the server lost the code (a restart, a flush),
    /// loads it and runs the call again, once.
    pub(super) async fn invoke_async<T: FromRedisValue>(
        &self,
        conn: &mut (impl ConnectionLike + Send),
    ) -> RedisResult<T> {
        match self.cmd().query_async(conn).await {
            Err(e) if is_missing(&e) => {
                self.script.load(conn).await?;
                self.cmd().query_async(conn).await
            }
            result => result,
        }
    }
}

/// Whether a call failed because the server does not have the code: a
/// function it does not know, or a script not in its cache. In a
/// pipeline's error too, which carries no detail of its own.
pub(super) fn is_missing(error: &RedisError) -> bool {
    error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
        || error.to_string().contains("Function not found")
}

/// `FUNCTION LOAD`'s answer for a library of that name already loaded:
/// the same code, since the name is the code's hash.
fn already_loaded(error: &RedisError) -> bool {
    error.to_string().contains("already exists")
}

/// A server without functions (Redis < 7: unknown command) or a user the
/// ACL does not let load them.
fn no_functions(error: &RedisError) -> bool {
    error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        || error.to_string().contains("unknown command")
}

#[cfg(test)]
mod tests {
    use super::Library;

    /// Two builds' libraries differ in name exactly when their code does,
    /// and every function is named under its library.
    #[test]
    fn a_library_is_named_for_its_code() {
        let scripts = [("a", "return 1"), ("b", "return KEYS[1]")];
        let one = Library::new("local X = 1\n", &scripts);
        let same = Library::new("local X = 1\n", &scripts);
        let other = Library::new("local X = 2\n", &scripts);
        assert_eq!(one.name, same.name);
        assert_ne!(one.name, other.name);
        assert!(one.code.starts_with(&format!("#!lua name={}\n", one.name)));
        for script in ["a", "b"] {
            let registered = format!("redis.register_function('{}_{script}', ", one.name);
            assert!(one.code.contains(&registered), "{}", one.code);
        }
        assert!(!one.code.contains("@@"), "{}", one.code);
    }
}
