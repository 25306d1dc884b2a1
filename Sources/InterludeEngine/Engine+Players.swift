import InterludePolicy
import InterludeWire

/// Port: MPRIS players on the session bus (implemented by the sd-bus adapter, `MprisWatcher` in
/// InterludeBus; a fake in tests). Calls go to a player's bus name (`org.mpris.MediaPlayer2.mpv`).
public protocol MediaPlayerControl: Sendable {
    /// `org.mpris.MediaPlayer2.Player.Pause`. Returns nil when the player answered, else the error.
    func pause(_ player: String) async -> String?
    /// `Play`, or `PlayPause` with `usePlayPause` (for players whose `Play` is known not to work).
    /// Returns nil when the player answered, else the error.
    func play(_ player: String, usePlayPause: Bool) async -> String?
}

/// A player as the bus adapter reads it when it appears.
public struct MediaPlayerInfo: Sendable, Equatable {
    /// Its well-known bus name, `org.mpris.MediaPlayer2.NAME[.instanceN]`.
    public var busName: String
    /// The bus peer's pid (`GetConnectionUnixProcessID`): its PulseAudio streams carry it as
    /// `application.process.id`.
    public var pid: Int32?
    /// `org.mpris.MediaPlayer2.Identity` ("mpv"), if read.
    public var identity: String?
    /// `org.mpris.MediaPlayer2.DesktopEntry` ("mpv", "org.gnome.Podcasts"), if read.
    public var desktopEntry: String?
    /// Its `org.mpris.MediaPlayer2.Player` properties.
    public var facts: PlayerFacts

    /// A player as read from the bus; `identity` and `desktopEntry` are cut to
    /// ``AudioStream/maxTextBytes`` on a character boundary: any bus client sets them, and one
    /// `Identity` of 600 KB (the player's session's app) made every `status` reply pass
    /// `server.maxOutputBytes` (a stranger's find).
    public init(busName: String, pid: Int32?, identity: String? = nil, desktopEntry: String? = nil, facts: PlayerFacts) {
        self.busName = busName; self.pid = pid; self.facts = facts
        self.identity = identity?.prefix(utf8Bytes: AudioStream.maxTextBytes)
        self.desktopEntry = desktopEntry?.prefix(utf8Bytes: AudioStream.maxTextBytes)
    }

    /// The part of the bus name after `org.mpris.MediaPlayer2.` ("mpv", "vlc.instance123").
    public var shortName: String {
        let prefix = "org.mpris.MediaPlayer2."
        return busName.hasPrefix(prefix) ? String(busName.dropFirst(prefix.count)) : busName
    }
}

/// One player the engine tracks.
struct PlayerRecord {
    var info: MediaPlayerInfo
    var id: AudioSessionID
    /// The app name its session carries (Identity, else the bus name's last part).
    var app: String
    /// Listed in `audio.spokenAudioPlayers` (A3).
    var spokenAudio: Bool
    /// The `media.role` of its streams, once one was seen (A10).
    var role: String?
}

/// The players' side of the engine's state.
struct PlayerBridgeState {
    var control: MediaPlayerControl?
    var byName: [String: PlayerRecord] = [:]
    /// `Pause` and `Play` calls in flight, by a serial number (``Engine/trackPlayerCommand(_:)``).
    var commands: [UInt64: Task<Void, Never>] = [:]
    var nextCommand: UInt64 = 0
    var nextID = 1
    /// Bus names by session id.
    var names: [AudioSessionID: String] = [:]
}

extension Engine {
    /// Connects the MPRIS adapter (nil: none; players are then not paused but their streams still
    /// get implicit sessions, A10).
    public func attachPlayers(_ control: MediaPlayerControl?) {
        mpris.control = control
    }

    /// A player appeared on the bus (or was there at start, `ListNames`): it becomes an implicit
    /// session (A10) that owns its streams (matched by pid); streams of that pid that had an
    /// implicit session of their own hand it over, so one app is one session.
    public func playerAppeared(_ info: MediaPlayerInfo) {
        if mpris.byName[info.busName] != nil { playerVanished(info.busName) }
        let id = AudioSessionID("p\(mpris.nextID)")
        mpris.nextID += 1
        let listed = Set(config.strings("audio.spokenAudioPlayers").map { $0.lowercased() })
        let names = [info.shortName, info.shortName.split(separator: ".").first.map(String.init), info.desktopEntry, info.identity]
            .compactMap { $0?.lowercased() }
        let spoken = names.contains { listed.contains($0) }
        let app = info.identity ?? info.shortName
        // Registered before its streams are found: the DesktopEntry match looks the player up.
        mpris.byName[info.busName] = PlayerRecord(info: info, id: id, app: app, spokenAudio: spoken, role: nil)
        let record = mpris.byName[info.busName]!
        let mine = streams.values.filter { manages($0) && stream($0, isOf: record) }.sorted { $0.index < $1.index }
        let role = mine.compactMap(\.role).first
        mpris.byName[info.busName]?.role = role
        mpris.names[id] = info.busName
        var takenOver: [AudioSessionID] = []
        for s in mine {
            if let old = implicitSession.removeValue(forKey: s.index) {
                duckReported[old] = nil
                let interrupted = audioState.sessions[old]?.state == .interrupted
                log("stream \(s.index) (pid \(info.pid.map(String.init) ?? "?")) joins player \(info.busName); its implicit \(old) goes"
                    + (interrupted ? ", the player takes its place and its interruption" : "") + " [A10]")
                takenOver.append(old)
            }
        }
        let d = AudioPolicy.playerDescriptor(app: app, role: role, spokenAudio: spoken)
        log("player \(info.busName) (pid \(info.pid.map(String.init) ?? "?"), \(mine.count) stream(s)) → implicit \(id) "
            + "\(d.category.rawValue)/\(d.mode.rawValue), \(info.facts.status.rawValue)"
            + (info.facts.pausable ? "" : ", cannot pause") + (spoken ? ", spoken audio (audio.spokenAudioPlayers)" : "") + " [A10]")
        reduce(.playerAppeared(id, d, info.facts, takingOver: takenOver))
        if let out = audioState.applied[id], out != .unity {
            for s in mine { _ = apply(out, to: s.index, ramp: 0) }  // A7
        }
    }

    /// A player's properties changed (`PropertiesChanged`, or read again).
    public func playerChanged(_ busName: String, _ facts: PlayerFacts) {
        guard let r = mpris.byName[busName], let before = audioState.sessions[r.id]?.player else { return }
        guard before.facts != facts else { return }
        reduce(.playerChanged(r.id, facts, descriptor: nil))
        let after = audioState.sessions[r.id]?.player
        if after?.userTouched == true, !before.userTouched {
            log("\(r.id) (\(busName)) \(facts.status.rawValue) by its user during the interruption: left alone, not paused, muted or resumed by Interlude [A5]")
        } else if after?.pauseObeyed == true, !before.pauseObeyed {
            log("\(r.id) (\(busName)) obeyed Pause: Paused [A4]")
        }
    }

    /// A player left the bus: its session goes (notifying others); its streams, if any remain, get
    /// implicit sessions of their own again (A10).
    public func playerVanished(_ busName: String) {
        guard let r = mpris.byName.removeValue(forKey: busName) else { return }
        mpris.names[r.id] = nil
        log("player \(busName) gone: \(r.id) unregistered")
        duckReported[r.id] = nil
        reduce(.playerVanished(r.id))
        for s in streams.values.sorted(by: { $0.index < $1.index }) where stream(s, isOf: r) && session(for: s) == nil {
            streamAppeared(s)
        }
    }

    /// The bus the players were watched on went away (the MPRIS adapter's connection lost): none
    /// of them can be paused or resumed through it any more, and whether they still run is not
    /// known. Each goes as if it had left the bus (its session unregistered, its streams given
    /// implicit sessions again, A10), and `status` lists no players (nil, not an empty list that
    /// reads as "watched, none found") until an adapter is attached again.
    public func playersUnwatched() {
        mpris.control = nil
        for name in mpris.byName.keys.sorted() { playerVanished(name) }
    }

    /// The session of the player whose bus peer has this pid, if any.
    func playerSession(pid: Int32) -> AudioSessionID? {
        mpris.byName.values.filter { $0.info.pid == pid }.map(\.id).min()
    }

    /// The session of the one player whose `DesktopEntry` names the stream's app (its flatpak app
    /// id, `application.id` or binary: ``AudioStream/appIdentifiers``), for a stream no pid
    /// matched: a browser's audio comes from another process than the one on the bus. Nil when no
    /// player, or more than one (two players of one app are told apart by pid only), matches.
    func playerSession(desktopEntryOf s: AudioStream) -> AudioSessionID? {
        guard !s.appIdentifiers.isEmpty else { return nil }
        for id in s.appIdentifiers {
            let matching = mpris.byName.values.filter { Self.desktopEntry($0.info.desktopEntry, names: id) }
            if matching.count == 1 { return matching[0].id }
            if matching.count > 1 { return nil }
        }
        return nil
    }

    /// Whether a player's `DesktopEntry` ("firefox", "org.mozilla.firefox", "chromium", with or
    /// without ".desktop") names `app`, a lowercased stream identifier. Only whole names count:
    /// "firefox-esr" is not "firefox".
    static func desktopEntry(_ entry: String?, names app: String) -> Bool {
        guard let entry = entry?.lowercased(), !entry.isEmpty else { return false }
        return entry == app || entry.hasSuffix(".desktop") && String(entry.dropLast(8)) == app
    }

    /// Whether a stream is a player's: by the bus peer's pid, else by its `DesktopEntry` (see
    /// ``playerSession(desktopEntryOf:)``).
    func stream(_ s: AudioStream, isOf r: PlayerRecord) -> Bool {
        if let pid = s.pid, pid == r.info.pid { return true }
        if let pid = s.pid, playerSession(pid: pid) != nil { return false }  // another player's by pid
        return playerSession(desktopEntryOf: s) == r.id
    }

    /// A10: a player's first stream with a `media.role` gives its session's mode (video →
    /// moviePlayback) unless it is listed as spoken audio.
    func playerStreamSeen(_ s: AudioStream, _ id: AudioSessionID) {
        guard let name = mpris.names[id], var r = mpris.byName[name], r.role == nil, let role = s.role,
              let p = audioState.sessions[id]?.player else { return }
        r.role = role
        mpris.byName[name] = r
        let d = AudioPolicy.playerDescriptor(app: r.app, role: role, spokenAudio: r.spokenAudio)
        if d != audioState.sessions[id]?.descriptor { reduce(.playerChanged(id, p.facts, descriptor: d)) }
    }

    /// Carries out `pausePlayer` (A4, A3) and `resumePlayer` (A5) through the port.
    func carryOutPlayer(_ e: AudioPolicyEffect) {
        let control = mpris.control
        let log = self.log
        switch e {
        case let .pausePlayer(id, rule):
            guard let name = mpris.names[id] else { return }
            log("\(id) (\(name)) Pause: Playing and can pause, interrupted \(rule == "A4" ? "by a call" : "for spoken audio") [\(rule)]")
            guard let control else { log("\(id): no MPRIS connection; A8 mutes it after the grace period"); return }
            let clock = self.clock, asked = clock.now
            trackPlayerCommand {
                if let err = await control.pause(name) { log("\(id) (\(name)) Pause failed: \(err); A8 mutes it after the grace period") }
                else { log("\(id) (\(name)) Pause answered in \(((clock.now - asked) * 10_000).rounded() / 10) ms") }
            }
        case let .resumePlayer(id, usePlayPause):
            guard let name = mpris.names[id] else { return }
            log("\(id) (\(name)) \(usePlayPause ? "PlayPause (CanPlay is false)" : "Play"): Interlude paused it, still Paused, untouched by its user [A5]")
            guard let control else { return }
            let clock = self.clock, asked = clock.now
            trackPlayerCommand {
                if let err = await control.play(name, usePlayPause: usePlayPause) { log("\(id) (\(name)) Play failed: \(err)") }
                else { log("\(id) (\(name)) \(usePlayPause ? "PlayPause" : "Play") answered in \(((clock.now - asked) * 10_000).rounded() / 10) ms") }
            }
        default: break
        }
    }

    /// Runs one `Pause` or `Play` call to a player on the audio lane, kept in
    /// ``PlayerBridgeState/commands`` until it returns, so that the daemon's stop can wait for it
    /// before it closes the bus connection (``releasePlayers(within:)``).
    func trackPlayerCommand(_ body: @escaping @Sendable () async -> Void) {
        mpris.nextCommand += 1
        let n = mpris.nextCommand
        mpris.commands[n] = Task(priority: EngineExecutor.audioLanePriority) {
            await body()
            self.playerCommandReturned(n)  // the task runs on the engine (it inherits its isolation)
        }
    }

    func playerCommandReturned(_ n: UInt64) { mpris.commands[n] = nil }

    /// The daemon is stopping (after the socket's connections closed, whose sessions' ends may
    /// have sent `Play` already): waits for the player calls in flight, then resumes every player
    /// Interlude still holds paused (``AudioPolicy/a5ResumePlayersAtStop(_:)``, A5) and waits
    /// for those calls too, all within `seconds` (a player that does not answer does not hold up
    /// the stop). Call before the bus connection closes: a stranger's mpv, paused for a call,
    /// stayed paused for good when the daemon stopped during the call (the `Play` went out on a
    /// closed connection).
    public func releasePlayers(within seconds: Double = 3) async {
        let inFlight = Array(mpris.commands.values)
        var toResume: [Task<Void, Never>] = []
        let finished = await finishes(within: seconds) { for t in inFlight { await t.value } }
        let fx = AudioPolicy.a5ResumePlayersAtStop(&audioState)
        if !fx.isEmpty { log("stopping: resuming \(fx.count) player(s) Interlude paused [A5]") }
        for e in fx {
            let before = mpris.nextCommand
            carryOutPlayer(e)
            if mpris.nextCommand != before, let t = mpris.commands[mpris.nextCommand] { toResume.append(t) }
        }
        let calls = toResume
        let resumed = await finishes(within: finished ? seconds : 0.5) { for t in calls { await t.value } }
        if !finished || !resumed { log("stopping: a media player did not answer within \(Int(seconds)) s") }
    }

    /// Logs what the policy decided for a player at `interruptionBegan` / `interruptionEnded` when
    /// it is no call of its own (left alone, muted); `pausePlayer` and `resumePlayer` log themselves.
    func logPlayerDecision(_ id: AudioSessionID) {
        guard let name = mpris.names[id], let p = audioState.sessions[id]?.player else { return }
        switch p.lastAction {
        case .leftAlonePausedBefore:
            log("\(id) (\(name)) left alone: it was \(p.facts.status.rawValue), not playing, when interrupted (its user paused it); not paused, not resumed [A5]")
        case .leftAloneUserTouched:
            log("\(id) (\(name)) left alone: its user changed it during the interruption; not resumed [A5]")
        case .leftAloneNoResume:
            log("\(id) (\(name)) not resumed: no shouldResume, or no longer Paused [A5]")
        case .none, .paused, .muted, .resumed: break
        }
    }

    /// Why A8 muted a session, for the log line.
    func muteReason(_ id: AudioSessionID) -> String {
        guard let p = audioState.sessions[id]?.player else { return "still playing after the grace period" }
        if !p.facts.canControl { return "player \(mpris.names[id] ?? "?") cannot be controlled (CanControl false), muted instead of paused" }
        if !p.facts.canPause { return "player \(mpris.names[id] ?? "?") cannot pause (CanPause false), muted instead of paused" }
        return "player \(mpris.names[id] ?? "?") did not obey Pause within the grace period"
    }

    /// The players for `status`.
    func playerStatuses() -> [PlayerStatus]? {
        guard mpris.control != nil || !mpris.byName.isEmpty else { return nil }
        return mpris.byName.values.sorted { $0.id.rawValue.count != $1.id.rawValue.count
            ? $0.id.rawValue.count < $1.id.rawValue.count : $0.id < $1.id }.map { r in
            let p = audioState.sessions[r.id]?.player
            let f = p?.facts ?? r.info.facts
            return PlayerStatus(player: r.info.busName, session: r.id, app: r.app, pid: r.info.pid, status: f.status.rawValue,
                                canPause: f.canPause, canPlay: f.canPlay, canControl: f.canControl,
                                action: (p?.lastAction ?? .none).rawValue, rule: p?.lastRule)
        }
    }
}
