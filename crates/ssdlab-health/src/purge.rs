//! What a drive's firmware offers to purge itself, read from the tools that ask it (nvme-cli's `id-ctrl -o json`
//! and `sanitize-log -o json`, hdparm's `-I` and `--sanitize-status`), the exact command lines that run each
//! purge, and the sequence that runs them: start, poll the drive's progress until it says done, and on an ATA
//! security erase that fails, take the temporary password off again so the drive is not left locked.
//!
//! The methods, in NIST SP 800-88's terms all purges: an NVMe or ATA **sanitize** (crypto erase, then block erase,
//! then overwrite: the drive erases every cell, spare area and caches included, and the operation survives a
//! power cycle), and a **secure erase** (NVMe Format with Secure Erase Settings 2 (crypto) or 1 (user data), ATA
//! SECURITY ERASE UNIT, enhanced where offered).
//!
//! Pure like the rest of the crate: it never runs a tool, sleeps or reads a clock. [`run_plan`] takes the runner
//! and the sleep from the caller (the binary, or a test's script of saved outputs). It never decides whether
//! erasing is allowed: the caller checks the safety gate, partitions and other namespaces first.

use serde_json::Value;

use crate::json::u64_at;

/// The two kinds of firmware purge `ssdlab erase` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirmwareMethod {
    Sanitize,
    SecureErase,
}

/// What an NVMe controller offers, from Identify Controller.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NvmeCaps {
    /// OACS bit 1: the Format NVM command.
    pub format: bool,
    /// FNA bit 0: a format of any namespace formats every namespace of the controller.
    pub format_all_namespaces: bool,
    /// FNA bit 1: a format's secure erase reaches every namespace of the controller.
    pub secure_erase_all_namespaces: bool,
    /// FNA bit 2: a format can erase cryptographically (SES 2).
    pub crypto_format: bool,
    /// SANICAP bits 0-2.
    pub sanitize_crypto: bool,
    pub sanitize_block: bool,
    pub sanitize_overwrite: bool,
    /// NN: the most namespaces the controller can have.
    pub max_namespaces: u64,
    /// CMIC bits 0-1: the subsystem has more than one port or controller (other hosts may reach it).
    pub shared_subsystem: bool,
}

impl NvmeCaps {
    /// Whether a format with secure erase of one namespace reaches the others too.
    pub fn format_reaches_all_namespaces(&self) -> bool {
        self.format_all_namespaces || self.secure_erase_all_namespaces
    }
}

/// Why a tool's output could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{tool}: {reason}")]
pub struct ToolOutputError {
    pub tool: String,
    pub reason: String,
}

fn tool_error(tool: &str, reason: impl Into<String>) -> ToolOutputError {
    ToolOutputError {
        tool: tool.into(),
        reason: reason.into(),
    }
}

/// Reads `nvme id-ctrl DEV -o json`.
pub fn parse_nvme_id_ctrl(text: &str) -> Result<NvmeCaps, ToolOutputError> {
    let tool = "nvme id-ctrl";
    let value: Value = serde_json::from_str(text).map_err(|e| tool_error(tool, format!("not JSON ({e})")))?;
    let field = |key: &str| {
        u64_at(&value, &[key]).ok_or_else(|| {
            tool_error(
                tool,
                format!("no \"{key}\" field; give the output of `nvme id-ctrl DEV -o json`"),
            )
        })
    };
    let (oacs, fna, sanicap) = (field("oacs")?, field("fna")?, field("sanicap")?);
    Ok(NvmeCaps {
        format: oacs & 0b10 != 0,
        format_all_namespaces: fna & 0b1 != 0,
        secure_erase_all_namespaces: fna & 0b10 != 0,
        crypto_format: fna & 0b100 != 0,
        sanitize_crypto: sanicap & 0b001 != 0,
        sanitize_block: sanicap & 0b010 != 0,
        sanitize_overwrite: sanicap & 0b100 != 0,
        max_namespaces: field("nn")?,
        shared_subsystem: field("cmic")? & 0b11 != 0,
    })
}

/// What an ATA drive offers, from `hdparm -I`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AtaCaps {
    /// The Security feature set.
    pub security: bool,
    /// A user password is set (the drive is locked at the next power-on).
    pub security_enabled: bool,
    pub locked: bool,
    /// SECURITY FREEZE LOCK was issued (usually by the BIOS): no security command until a power cycle.
    pub frozen: bool,
    /// Too many wrong passwords: no security command until a power cycle.
    pub count_expired: bool,
    pub enhanced_erase: bool,
    /// The drive's own estimates.
    pub erase_minutes: Option<u32>,
    pub enhanced_erase_minutes: Option<u32>,
    /// The SANITIZE feature set and its three commands.
    pub sanitize: bool,
    pub sanitize_crypto: bool,
    pub sanitize_block: bool,
    pub sanitize_overwrite: bool,
}

/// Whether a feature line of `hdparm -I` (`\t   *\tNAME` enabled/supported, `\t    \tNAME` supported only, or
/// `\tnot\tNAME`) names `feature` as supported.
fn feature_supported(text: &str, feature: &str) -> bool {
    text.lines().any(|line| {
        let trimmed = line.trim();
        let name = trimmed.trim_start_matches('*').trim();
        name == feature && !trimmed.starts_with("not")
    })
}

/// Reads `hdparm -I DEV`.
pub fn parse_hdparm_identify(text: &str) -> Result<AtaCaps, ToolOutputError> {
    let tool = "hdparm -I";
    if !text.contains("Commands/features:") && !text.contains("Security:") {
        return Err(tool_error(
            tool,
            "neither a feature list nor a Security section; give the output of `hdparm -I DEV` for an ATA drive",
        ));
    }
    let mut caps = AtaCaps {
        sanitize: feature_supported(text, "SANITIZE feature set"),
        sanitize_crypto: feature_supported(text, "CRYPTO_SCRAMBLE_EXT command"),
        sanitize_block: feature_supported(text, "BLOCK_ERASE_EXT command"),
        sanitize_overwrite: feature_supported(text, "OVERWRITE_EXT command"),
        ..AtaCaps::default()
    };
    if let Some((_, security)) = text.split_once("Security:") {
        // The section's lines are "<not?>\t<state>" until the next unindented heading.
        for line in security.lines().skip(1) {
            if !line.starts_with(['\t', ' ']) {
                break;
            }
            let trimmed = line.trim();
            let (negated, state) = match trimmed.strip_prefix("not") {
                Some(rest) if rest.starts_with(['\t', ' ']) => (true, rest.trim()),
                _ => (false, trimmed),
            };
            match state {
                "supported" => caps.security = !negated,
                "enabled" => caps.security_enabled = !negated,
                "locked" => caps.locked = !negated,
                "frozen" => caps.frozen = !negated,
                "expired: security count" => caps.count_expired = !negated,
                "supported: enhanced erase" => caps.enhanced_erase = !negated,
                _ if state.contains("for SECURITY ERASE UNIT") => {
                    caps.erase_minutes = minutes_before(state, "min for SECURITY ERASE UNIT");
                    caps.enhanced_erase_minutes =
                        minutes_before(state, "min for ENHANCED SECURITY ERASE UNIT");
                }
                _ => {}
            }
        }
    }
    Ok(caps)
}

/// The number just before `marker` in `text` ("226min for SECURITY ERASE UNIT" -> 226).
fn minutes_before(text: &str, marker: &str) -> Option<u32> {
    let end = text.find(marker)?;
    let digits: String = text[..end]
        .chars()
        .rev()
        .take_while(char::is_ascii_digit)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    digits.parse().ok()
}

/// A sanitize's progress as the drive reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum SanitizeState {
    /// Not sanitizing, and no completed sanitize recorded (NVMe status 0, or an idle ATA drive with no result).
    Idle,
    InProgress {
        percent: Option<f64>,
    },
    /// The most recent sanitize completed; `action` is its SANACT where the drive says (NVMe's CDW10).
    Succeeded {
        action: Option<u64>,
    },
    Failed(String),
}

/// Reads `nvme sanitize-log DEV -o json`: `{"DEV": {"sprog": N, "sstat": {"status": "(S) text", ...}}}` (some
/// nvme-cli versions put the status under its text as the key; both are read).
pub fn parse_nvme_sanitize_log(text: &str) -> Result<SanitizeState, ToolOutputError> {
    let tool = "nvme sanitize-log";
    let value: Value = serde_json::from_str(text).map_err(|e| tool_error(tool, format!("not JSON ({e})")))?;
    let log = value
        .as_object()
        .and_then(|o| o.values().find(|v| v.get("sstat").is_some()))
        .or_else(|| value.get("sstat").map(|_| &value))
        .ok_or_else(|| {
            tool_error(
                tool,
                "no \"sstat\"; give the output of `nvme sanitize-log DEV -o json`",
            )
        })?;
    let sstat = &log["sstat"];
    let status_text = sstat
        .as_object()
        .and_then(|o| o.values().filter_map(Value::as_str).find(|s| s.starts_with('(')))
        .ok_or_else(|| tool_error(tool, "sstat has no \"(N) ...\" status"))?;
    let code: u64 = status_text[1..]
        .split(')')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| tool_error(tool, format!("unreadable status {status_text:?}")))?;
    // SSTAT bits 2:0: 0 never sanitized, 1 completed, 2 in progress, 3 failed, 4 completed without deallocation.
    Ok(match code {
        0 => SanitizeState::Idle,
        1 | 4 => SanitizeState::Succeeded {
            action: u64_at(log, &["cdw10_info"]).map(|cdw10| cdw10 & 0b111),
        },
        2 => SanitizeState::InProgress {
            percent: u64_at(log, &["sprog"]).map(|p| 100.0 * p as f64 / 65536.0),
        },
        3 => SanitizeState::Failed(format!("the drive reports {status_text}")),
        _ => SanitizeState::Failed(format!("unknown sanitize status {status_text}")),
    })
}

/// Reads `hdparm --sanitize-status DEV`.
pub fn parse_hdparm_sanitize_status(text: &str) -> SanitizeState {
    let lower = text.to_ascii_lowercase();
    if lower.contains("in process") {
        let percent = lower
            .split_once("progress:")
            .and_then(|(_, rest)| rest.split_once('(')?.1.split_once('%'))
            .and_then(|(p, _)| p.trim().parse().ok());
        SanitizeState::InProgress { percent }
    } else if lower.contains("completed without error") || lower.contains("operation succeeded") {
        SanitizeState::Succeeded { action: None }
    } else if lower.contains("failed") || lower.contains("frozen") {
        SanitizeState::Failed(format!("hdparm says: {}", text.trim()))
    } else {
        SanitizeState::Idle
    }
}

/// How to read a purge's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFormat {
    NvmeSanitizeLog,
    HdparmSanitizeStatus,
}

/// A firmware purge as command lines.
#[derive(Debug, Clone, PartialEq)]
pub struct PurgePlan {
    pub method: FirmwareMethod,
    /// What it is, for the output ("NVMe sanitize, crypto erase").
    pub label: String,
    /// Run in order; the purge has started when the last one succeeds.
    pub steps: Vec<Vec<String>>,
    /// Polled until it reports the end, for purges that run in the background.
    pub status: Option<(Vec<String>, StatusFormat)>,
    /// The SANACT a completed sanitize must show in the log to be this one (NVMe).
    pub expected_action: Option<u64>,
    /// Run if any step fails (the ATA password set before the erase is taken off again).
    pub undo: Option<Vec<String>>,
    /// `hdparm -I`, run when the undo fails too, to say whether a password is left on the drive.
    pub identify: Option<Vec<String>>,
    /// Said before the first step (what is left on the drive if the purge is cut off).
    pub notice: Option<String>,
    /// The drive's own estimate, when it gives one.
    pub estimate_minutes: Option<u32>,
}

impl PurgePlan {
    fn new(method: FirmwareMethod, label: String, steps: Vec<Vec<String>>) -> Self {
        PurgePlan {
            method,
            label,
            steps,
            status: None,
            expected_action: None,
            undo: None,
            identify: None,
            notice: None,
            estimate_minutes: None,
        }
    }
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// The temporary ATA user password: set just before the erase, which clears it.
pub const ATA_TEMPORARY_PASSWORD: &str = "ssdlab";

/// An NVMe sanitize through the controller's character device `controller` (`/dev/nvme0`): crypto erase, else
/// block erase, else one overwrite pass. The caller has checked that the subsystem holds only the gated namespace.
pub fn nvme_sanitize_plan(caps: &NvmeCaps, nvme: &str, controller: &str) -> Result<PurgePlan, String> {
    let (action, name, extra): (u64, &str, &[&str]) = if caps.sanitize_crypto {
        (4, "crypto erase", &[])
    } else if caps.sanitize_block {
        (2, "block erase", &[])
    } else if caps.sanitize_overwrite {
        // nvme-cli's default pass count (0) means 16 passes; one is what a purge needs.
        (3, "overwrite", &["--owpass=1"])
    } else {
        return Err("the controller offers no sanitize action (SANICAP is 0)".into());
    };
    let mut start = argv(&[nvme, "sanitize", controller, &format!("--sanact={action}")]);
    start.extend(argv(extra));
    Ok(PurgePlan {
        status: Some((
            argv(&[nvme, "sanitize-log", controller, "-o", "json"]),
            StatusFormat::NvmeSanitizeLog,
        )),
        expected_action: Some(action),
        ..PurgePlan::new(
            FirmwareMethod::Sanitize,
            format!("NVMe sanitize, {name}"),
            vec![start],
        )
    })
}

/// An NVMe Format with secure erase of namespace `nsid`, through the controller's character device (so nvme-cli
/// does not touch the block device, which ssdlab holds open exclusively): cryptographic where the controller
/// offers it. The caller has checked what else the format reaches.
pub fn nvme_format_plan(
    caps: &NvmeCaps,
    nvme: &str,
    controller: &str,
    nsid: u32,
) -> Result<PurgePlan, String> {
    if !caps.format {
        return Err("the controller does not support the Format NVM command (OACS bit 1)".into());
    }
    let (ses, name) = if caps.crypto_format {
        ("2", "cryptographic erase")
    } else {
        ("1", "user data erase")
    };
    let step = argv(&[
        nvme,
        "format",
        controller,
        &format!("--namespace-id={nsid}"),
        &format!("--ses={ses}"),
        // A user-data erase of a large namespace outlasts nvme-cli's default of 600 s.
        "--timeout=14400000",
        "--force",
    ]);
    Ok(PurgePlan::new(
        FirmwareMethod::SecureErase,
        format!("NVMe format, {name}"),
        vec![step],
    ))
}

/// An ATA sanitize: crypto scramble, else block erase (overwrite is left out: it needs a pattern and takes hours).
pub fn ata_sanitize_plan(caps: &AtaCaps, hdparm: &str, device: &str) -> Result<PurgePlan, String> {
    if !caps.sanitize {
        return Err("the drive does not offer the SANITIZE feature set".into());
    }
    let (flag, name) = if caps.sanitize_crypto {
        ("--sanitize-crypto-scramble", "crypto scramble")
    } else if caps.sanitize_block {
        ("--sanitize-block-erase", "block erase")
    } else {
        return Err("the drive's SANITIZE offers neither crypto scramble nor block erase".into());
    };
    let step = argv(&[hdparm, "--yes-i-know-what-i-am-doing", flag, device]);
    Ok(PurgePlan {
        status: Some((
            argv(&[hdparm, "--sanitize-status", device]),
            StatusFormat::HdparmSanitizeStatus,
        )),
        ..PurgePlan::new(
            FirmwareMethod::Sanitize,
            format!("ATA sanitize, {name}"),
            vec![step],
        )
    })
}

/// An ATA SECURITY ERASE UNIT (enhanced where offered): set a temporary user password, then erase, which clears
/// it. Refused when the drive is frozen, locked, out of password tries, or already has a password ssdlab does not
/// know.
pub fn ata_security_erase_plan(caps: &AtaCaps, hdparm: &str, device: &str) -> Result<PurgePlan, String> {
    if !caps.security {
        return Err("the drive does not offer the ATA Security feature set".into());
    }
    if caps.frozen {
        return Err(
            "the drive's security is frozen (usually by the BIOS at boot): suspend and resume the machine, or \
             re-plug the drive, and check `hdparm -I` says \"not frozen\""
                .into(),
        );
    }
    if caps.locked || caps.security_enabled {
        return Err(
            "the drive already has a user password (security enabled or locked): ssdlab will not guess it"
                .into(),
        );
    }
    if caps.count_expired {
        return Err("the drive's password attempt counter has expired: power-cycle it first".into());
    }
    let (flag, name, minutes) = if caps.enhanced_erase {
        (
            "--security-erase-enhanced",
            "enhanced",
            caps.enhanced_erase_minutes,
        )
    } else {
        ("--security-erase", "normal", caps.erase_minutes)
    };
    let pass = ATA_TEMPORARY_PASSWORD;
    let undo = argv(&[hdparm, "--user-master", "u", "--security-disable", pass, device]);
    let steps = vec![
        argv(&[hdparm, "--user-master", "u", "--security-set-pass", pass, device]),
        argv(&[hdparm, "--user-master", "u", flag, pass, device]),
    ];
    Ok(PurgePlan {
        notice: Some(format!(
            "sets the temporary ATA user password \"{pass}\", which the erase clears; if it is cut off before it \
             ends, the drive locks at its next power-on: `{}` unlocks it",
            undo.join(" ")
        )),
        undo: Some(undo),
        identify: Some(argv(&[hdparm, "-I", device])),
        estimate_minutes: minutes,
        ..PurgePlan::new(
            FirmwareMethod::SecureErase,
            format!("ATA SECURITY ERASE UNIT ({name})"),
            steps,
        )
    })
}

/// What a tool run returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// How a firmware purge failed: why, and whether it had started (the drive may still be purging itself, so
/// nothing else should be sent to it until it says it is done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFailure {
    pub reason: String,
    pub started: bool,
}

/// Idle answers in a row, after a sanitize was started, before the drive is taken not to be sanitizing at all.
const MAX_IDLE_POLLS: u32 = 12;

/// Runs `plan` with `run` (one command line -> its outcome, or why it could not start) and `sleep` (seconds)
/// between polls, giving up after `max_polls`. Returns what happened, line by line, or how it failed.
pub fn run_plan(
    plan: &PurgePlan,
    run: &mut dyn FnMut(&[String]) -> Result<ToolRun, String>,
    sleep: &mut dyn FnMut(u64),
    poll_interval_s: u64,
    max_polls: u32,
) -> Result<Vec<String>, RunFailure> {
    // What the drive says before anything is sent: a completion it reports already is an earlier sanitize's,
    // and must not be taken for this one's (ATA's status does not say which sanitize completed).
    let before = match &plan.status {
        Some((status, format)) => Some(read_state(run, status, *format).map_err(|reason| RunFailure {
            reason: format!("cannot read the sanitize status before starting: {reason}; nothing was sent"),
            started: false,
        })?),
        None => None,
    };
    let log = run_steps(plan, run)?;
    let Some((status, format)) = &plan.status else {
        return Ok(log);
    };
    let polling = Polling {
        status,
        format: *format,
        expected_action: plan.expected_action,
        leftover: matches!(before, Some(SanitizeState::Succeeded { .. })),
        interval_s: poll_interval_s,
        max_polls,
    };
    polling.until_done(run, sleep, log)
}

/// Runs the plan's steps in order, returning a line for each. A failed step before the last is undone where the
/// plan can be; a failed last step may have started the purge all the same, so nothing else is sent.
fn run_steps(
    plan: &PurgePlan,
    run: &mut dyn FnMut(&[String]) -> Result<ToolRun, String>,
) -> Result<Vec<String>, RunFailure> {
    let mut log = vec![];
    for (i, step) in plan.steps.iter().enumerate() {
        let outcome = run(step).and_then(|r| {
            if r.success {
                Ok(r)
            } else {
                Err(format!("`{}` failed: {}", step.join(" "), r.stderr.trim()))
            }
        });
        match outcome {
            Ok(_) => log.push(format!("ran `{}`", step.join(" "))),
            // The last step starts the purge: a timeout or a dropped command there may have started it all the
            // same, so nothing else is sent to the drive after it, not even the undo.
            Err(why) if i + 1 == plan.steps.len() => return Err(cut_off_at_start(plan, &why)),
            Err(why) => {
                return Err(RunFailure {
                    reason: undo(plan, run, why),
                    started: false,
                });
            }
        }
    }
    Ok(log)
}

/// The failure of the step that starts the purge (`why`): the drive may have begun all the same, so it is to be
/// checked before anything else, and how to take a temporary password off once it is not erasing.
fn cut_off_at_start(plan: &PurgePlan, why: &str) -> RunFailure {
    let unlock = match (&plan.undo, &plan.identify) {
        (Some(undo), Some(identify)) => format!(
            "; once `{}` shows it is not erasing, `{}` takes the temporary password off if one is left",
            identify.join(" "),
            undo.join(" ")
        ),
        _ => String::new(),
    };
    RunFailure {
        reason: format!(
            "{why}; the drive may have begun the purge all the same, so nothing else was sent to it: check it \
             before anything else{unlock}"
        ),
        started: true,
    }
}

/// How a started sanitize is watched until the drive reports its end.
struct Polling<'a> {
    /// The status command and how its answer is read.
    status: &'a [String],
    format: StatusFormat,
    /// The SANACT a completed sanitize must show to be this one (NVMe).
    expected_action: Option<u64>,
    /// Whether the drive reported a completed sanitize before this one was sent (an earlier one's).
    leftover: bool,
    interval_s: u64,
    max_polls: u32,
}

impl Polling<'_> {
    /// A failure once the sanitize was sent: the drive may still be sanitizing, so it is to be checked first.
    fn started(&self, reason: String) -> RunFailure {
        RunFailure {
            reason: format!(
                "{reason}; the drive may still be sanitizing (a sanitize survives a power cycle): check `{}` \
                 before anything else",
                self.status.join(" ")
            ),
            started: true,
        }
    }

    /// Polls the status every `interval_s` until the drive reports this sanitize completed (adding that line to
    /// `log`) or failed, stays idle for [`MAX_IDLE_POLLS`] polls in a row, or `max_polls` have passed.
    fn until_done(
        &self,
        run: &mut dyn FnMut(&[String]) -> Result<ToolRun, String>,
        sleep: &mut dyn FnMut(u64),
        mut log: Vec<String>,
    ) -> Result<Vec<String>, RunFailure> {
        let mut idle = 0;
        let mut seen_in_progress = false;
        for _ in 0..self.max_polls {
            let state = read_state(run, self.status, self.format).map_err(|reason| self.started(reason))?;
            match state {
                // A completed sanitize of another kind is an earlier one: this one has not begun reporting.
                SanitizeState::Succeeded { action: Some(a) }
                    if self.expected_action.is_some_and(|e| e != a) =>
                {
                    idle += 1
                }
                // The completion the drive reported before we started, until this sanitize has shown itself.
                SanitizeState::Succeeded { .. } if self.leftover && !seen_in_progress => idle += 1,
                SanitizeState::Succeeded { .. } => {
                    log.push("the drive reports the sanitize completed".into());
                    return Ok(log);
                }
                SanitizeState::Failed(why) => return Err(self.started(why)),
                SanitizeState::Idle => idle += 1,
                SanitizeState::InProgress { .. } => {
                    idle = 0;
                    seen_in_progress = true;
                }
            }
            if idle >= MAX_IDLE_POLLS {
                let earlier = if self.leftover {
                    " (it reported a completed sanitize from before this one started, and never this one in progress)"
                } else {
                    ""
                };
                return Err(self.started(format!(
                    "the drive accepted the sanitize but has not reported it in progress or completed in \
                     {MAX_IDLE_POLLS} polls{earlier}"
                )));
            }
            sleep(self.interval_s);
        }
        Err(self.started(format!(
            "the drive had not reported the end of the sanitize after {} s",
            u64::from(self.max_polls) * self.interval_s
        )))
    }
}

/// Runs the status command once and reads its answer.
fn read_state(
    run: &mut dyn FnMut(&[String]) -> Result<ToolRun, String>,
    status: &[String],
    format: StatusFormat,
) -> Result<SanitizeState, String> {
    let r = run(status)?;
    if !r.success {
        return Err(format!("`{}` failed: {}", status.join(" "), r.stderr.trim()));
    }
    Ok(match format {
        StatusFormat::NvmeSanitizeLog => parse_nvme_sanitize_log(&r.stdout).map_err(|e| e.to_string())?,
        StatusFormat::HdparmSanitizeStatus => parse_hdparm_sanitize_status(&r.stdout),
    })
}

/// After a failed step that cannot have started the purge: runs the plan's undo, if it has one, and says what is left on the drive.
fn undo(plan: &PurgePlan, run: &mut dyn FnMut(&[String]) -> Result<ToolRun, String>, why: String) -> String {
    let Some(undo) = &plan.undo else {
        return why;
    };
    if matches!(run(undo), Ok(r) if r.success) {
        return format!("{why}; the temporary password was taken off again");
    }
    // The undo also fails when no password was set (the first step failed): ask the drive.
    let password_set = plan
        .identify
        .as_ref()
        .and_then(|identify| run(identify).ok())
        .filter(|r| r.success)
        .and_then(|r| parse_hdparm_identify(&r.stdout).ok())
        .map(|caps| caps.security_enabled || caps.locked);
    match password_set {
        Some(false) => format!("{why}; no password is left on the drive"),
        _ => format!(
            "{why}; taking the temporary password off failed too: the drive may be locked with the user password \
             \"{ATA_TEMPORARY_PASSWORD}\"; `{}` unlocks it",
            undo.join(" ")
        ),
    }
}
