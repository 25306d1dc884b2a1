import Foundation
import Glibc
import InterludeSound
import Testing

/// A fake layout: app folders, a user folder, a project folder and two XDG data dirs
/// (`home` = $XDG_DATA_HOME, `system` = /usr/share), all inside one temporary folder.
struct Layout {
    let root: String
    var app: String { root + "/app" }
    var app2: String { root + "/app2" }
    var user: String { root + "/user" }
    var project: String { root + "/project" }
    var home: String { root + "/home-share" }
    var system: String { root + "/usr-share" }
    var outside: String { root + "/outside" }

    init(root: String) throws {
        self.root = root
        for d in [app, app2, user, project, home, system, outside] { try makeDir(d) }
    }

    func lookup(theme: String = "freedesktop", apps: [String]? = nil) -> SoundLookup {
        SoundLookup(appFolders: apps ?? [app, app2], userFolder: user, projectFolder: project,
                    dataDirs: [home, system], theme: theme)
    }

    /// Creates a theme in `dataDir` with an index.theme (nil: none).
    func theme(_ name: String, in dataDir: String, inherits: String? = nil, directories: String? = "stereo") throws {
        guard inherits != nil || directories != nil else { return }
        var text = "# test theme\n[Sound Theme]\nName=\(name)\nName[de]=ignored\n"
        if let inherits { text += "Inherits=\(inherits)\n" }
        if let directories { text += "Directories=\(directories)\n" }
        text += "\n[stereo]\nOutputProfile=stereo\n[Other]\nInherits=not-this-one\n"
        try writeText("\(dataDir)/sounds/\(name)/index.theme", text)
    }

    /// Creates a (dummy) sound file and returns its canonical path.
    @discardableResult
    func sound(_ path: String) throws -> String {
        try writeText(path, "RIFF-ish")
        return real(path)
    }
}

@Suite("S2 lookup")
struct SoundLookupTests {
    // MARK: Order of folders

    @Test func S2_folderOrderIsAppUserProjectThenTheme() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let inTheme = try l.sound(l.system + "/sounds/freedesktop/stereo/bell.oga")
            let inProject = try l.sound(l.project + "/bell.wav")
            let inUser = try l.sound(l.user + "/bell.wav")
            let inApp2 = try l.sound(l.app2 + "/bell.wav")
            let inApp = try l.sound(l.app + "/bell.wav")
            let lookup = l.lookup()
            #expect(lookup.resolve("bell") == .file(inApp))
            unlink(inApp)
            #expect(lookup.resolve("bell") == .file(inApp2))
            unlink(inApp2)
            #expect(lookup.resolve("bell") == .file(inUser))
            unlink(inUser)
            #expect(lookup.resolve("bell") == .file(inProject))
            unlink(inProject)
            #expect(lookup.resolve("bell") == .file(inTheme))
            unlink(inTheme)
            #expect(lookup.resolve("bell") == .notFound)
        }
    }

    @Test func S2_extensionsAreTriedInOrderAndANamedExtensionFirst() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let mp3 = try l.sound(l.user + "/ping.mp3")
            let caf = try l.sound(l.user + "/ping.caf")
            let flac = try l.sound(l.user + "/ping.flac")
            let lookup = l.lookup()
            #expect(lookup.resolve("ping") == .file(flac))       // flac comes before caf and mp3
            #expect(lookup.resolve("ping.caf") == .file(caf))    // a name with an extension tries it first
            #expect(lookup.resolve("ping.mp3") == .file(mp3))
            unlink(flac)
            #expect(lookup.resolve("ping.flac") == .file(caf))   // then the usual order
            let opus = try l.sound(l.project + "/chirp.opus")
            #expect(lookup.resolve("chirp") == .file(opus))
            #expect(SoundLookup.extensions.prefix(7) == ["wav", "oga", "ogg", "flac", "aiff", "caf", "mp3"])
        }
    }

    @Test func S2_folderOrderBeatsExtensionOrder() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let userMP3 = try l.sound(l.user + "/ding.mp3")
            try l.sound(l.project + "/ding.wav")
            #expect(l.lookup().resolve("ding") == .file(userMP3))
        }
    }

    // MARK: Sound theme

    @Test func S2_themeInheritsViaIndexTheme() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.theme("ocean", in: l.system, inherits: "coast")
            try l.theme("coast", in: l.system, inherits: "beach")
            try l.theme("beach", in: l.system)
            try l.theme("freedesktop", in: l.system)
            let oceanOnly = try l.sound(l.system + "/sounds/ocean/stereo/wave.oga")
            try l.sound(l.system + "/sounds/coast/stereo/wave.oga")         // shadowed by ocean
            let coast = try l.sound(l.system + "/sounds/coast/stereo/gull.oga")
            try l.sound(l.system + "/sounds/freedesktop/stereo/gull.oga")   // freedesktop is last
            let beach = try l.sound(l.system + "/sounds/beach/stereo/sand.ogg")
            let fallback = try l.sound(l.system + "/sounds/freedesktop/stereo/bell.oga")
            let lookup = l.lookup(theme: "ocean")
            #expect(lookup.resolve("wave") == .file(oceanOnly))
            #expect(lookup.resolve("gull") == .file(coast))
            #expect(lookup.resolve("sand") == .file(beach))       // grandparent
            #expect(lookup.resolve("bell") == .file(fallback))    // freedesktop, never listed
            #expect(lookup.resolve("foam") == .notFound)
            // Another theme selected: ocean's files are not used.
            #expect(l.lookup(theme: "beach").resolve("wave") == .notFound)
        }
    }

    @Test func S2_freedesktopIsSearchedLastEvenWhenInheritedEarly() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.theme("a", in: l.system, inherits: "freedesktop,b")
            try l.theme("b", in: l.system)
            let inB = try l.sound(l.system + "/sounds/b/stereo/x.oga")
            try l.sound(l.system + "/sounds/freedesktop/stereo/x.oga")
            // Spec order for "Inherits=freedesktop,b" is a, freedesktop, b: an explicit listing
            // is honoured in place.
            #expect(l.lookup(theme: "a").resolve("x") == .file(real(l.system + "/sounds/freedesktop/stereo/x.oga")))
            try l.theme("a", in: l.system, inherits: "b")
            #expect(l.lookup(theme: "a").resolve("x") == .file(inB))
        }
    }

    @Test func S2_inheritanceCycleTerminates() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.theme("p", in: l.system, inherits: "q")
            try l.theme("q", in: l.system, inherits: "p, ../../outside")
            let f = try l.sound(l.system + "/sounds/freedesktop/stereo/end.oga")
            try l.sound(l.outside + "/stereo/end.oga")
            #expect(l.lookup(theme: "p").resolve("end") == .file(f))
            #expect(l.lookup(theme: "p").resolve("nothing") == .notFound)
        }
    }

    @Test func S2_themeDirectoriesFromIndexThemeAndStereo() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.theme("t", in: l.system, directories: "extra, more/deep, ../escape")
            let extra = try l.sound(l.system + "/sounds/t/extra/one.wav")
            let deep = try l.sound(l.system + "/sounds/t/more/deep/two.wav")
            let stereo = try l.sound(l.system + "/sounds/t/stereo/three.wav")
            try l.sound(l.system + "/sounds/t/stereo/one.wav")   // listed dirs come before stereo
            try l.sound(l.system + "/sounds/escape/four.wav")
            let lookup = l.lookup(theme: "t")
            #expect(lookup.resolve("one") == .file(extra))
            #expect(lookup.resolve("two") == .file(deep))
            #expect(lookup.resolve("three") == .file(stereo))
            #expect(lookup.resolve("four") == .notFound)          // "../escape" is ignored
        }
    }

    @Test func S2_dataHomeOverridesSystemWithinATheme() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.theme("freedesktop", in: l.system)
            let home = try l.sound(l.home + "/sounds/freedesktop/stereo/bell.oga")
            try l.sound(l.system + "/sounds/freedesktop/stereo/bell.oga")
            let systemOnly = try l.sound(l.system + "/sounds/freedesktop/stereo/complete.oga")
            #expect(l.lookup().resolve("bell") == .file(home))
            #expect(l.lookup().resolve("complete") == .file(systemOnly))
        }
    }

    // MARK: .disabled

    @Test func S2_disabledMeansSilentOnPurpose() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.sound(l.project + "/message.wav")
            try writeText(l.user + "/message.disabled", "")
            try l.sound(l.user + "/message.wav")                  // .disabled wins beside a file
            let lookup = l.lookup()
            #expect(lookup.resolve("message") == .disabled(real(l.user + "/message.disabled")))
            // An earlier folder's file beats a later folder's .disabled.
            try l.sound(l.app + "/message.oga")
            #expect(lookup.resolve("message") == .file(real(l.app + "/message.oga")))
            // .disabled in a theme.
            try writeText(l.system + "/sounds/freedesktop/stereo/bell.disabled", "")
            #expect(lookup.resolve("bell") == .disabled(real(l.system + "/sounds/freedesktop/stereo/bell.disabled")))
        }
    }

    // MARK: Dash trimming

    @Test func S2_nameIsTrimmedAtItsLastDash() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let message = try l.sound(l.system + "/sounds/freedesktop/stereo/message.oga")
            let lookup = l.lookup()
            #expect(lookup.resolve("message-new-instant") == .file(message))
            let newMessage = try l.sound(l.system + "/sounds/freedesktop/stereo/message-new.oga")
            #expect(lookup.resolve("message-new-instant") == .file(newMessage))
            let instant = try l.sound(l.system + "/sounds/freedesktop/stereo/message-new-instant.oga")
            #expect(lookup.resolve("message-new-instant") == .file(instant))
            #expect(lookup.resolve("message-") == .file(message))
            #expect(lookup.resolve("mess") == .notFound)
            #expect(lookup.resolve("-") == .notFound)
        }
    }

    @Test func S2_fullNameAnywhereBeatsTrimmedNameEarlier() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.sound(l.app + "/message.wav")
            let full = try l.sound(l.system + "/sounds/freedesktop/stereo/message-new-instant.oga")
            #expect(l.lookup().resolve("message-new-instant") == .file(full))
            // A .disabled for the trimmed name applies only once the full name is missing.
            try writeText(l.user + "/dialog.disabled", "")
            #expect(l.lookup().resolve("dialog-warning") == .disabled(real(l.user + "/dialog.disabled")))
        }
    }

    // MARK: Paths inside and outside the folders

    @Test func S2_pathInsideFoldersIsAccepted() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let user = try l.sound(l.user + "/mine.wav")
            let theme = try l.sound(l.system + "/sounds/other-theme/stereo/x.oga")
            let lookup = l.lookup()
            #expect(lookup.resolve(l.user + "/mine.wav") == .file(user))
            #expect(lookup.resolve(l.user + "/./sub/../mine.wav") == .notFound)  // like open(2): "sub" must exist
            try makeDir(l.user + "/sub")
            #expect(lookup.resolve(l.user + "/./sub/../mine.wav") == .file(user))
            #expect(lookup.resolve(l.user + "//mine.wav") == .file(user))
            #expect(lookup.resolve(theme) == .file(theme))        // anything under DATADIR/sounds
            #expect(lookup.resolve(l.user + "/absent.wav") == .notFound)
        }
    }

    @Test func S2_pathOutsideFoldersIsRefused() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let outside = try l.sound(l.outside + "/evil.wav")
            let lookup = l.lookup()
            #expect(lookup.resolve(outside) == .refused(.outsideSoundFolders(path: outside)))
            #expect(lookup.resolve("/etc/passwd") == .refused(.outsideSoundFolders(path: "/etc/passwd")))
            #expect(lookup.resolve(l.outside + "/absent.wav") == .refused(.outsideSoundFolders(path: l.outside + "/absent.wav")))
            // A sibling whose name starts with a folder's name is not inside it.
            try makeDir(l.user + "-evil")
            let sibling = try l.sound(l.user + "-evil/x.wav")
            #expect(lookup.resolve(sibling) == .refused(.outsideSoundFolders(path: sibling)))
            if case .refused(let error) = lookup.resolve(outside) { #expect(error.code == "soundOutsideFolders") }
        }
    }

    @Test func S2_dotDotEscapeIsRefused() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try l.sound(l.outside + "/evil.wav")
            let lookup = l.lookup()
            let escape = l.user + "/../outside/evil.wav"
            #expect(lookup.resolve(escape) == .refused(.outsideSoundFolders(path: escape)))
            let deep = l.project + "/../../../../../../etc/passwd"
            #expect(lookup.resolve(deep) == .refused(.outsideSoundFolders(path: deep)))
            let missing = l.user + "/../outside/absent.wav"
            #expect(lookup.resolve(missing) == .refused(.outsideSoundFolders(path: missing)))
            // Relative paths and names with "/" are never looked up.
            #expect(lookup.resolve("../outside/evil") == .refused(.outsideSoundFolders(path: "../outside/evil")))
            #expect(lookup.resolve("stereo/bell") == .refused(.outsideSoundFolders(path: "stereo/bell")))
            #expect(lookup.resolve("..") == .refused(.outsideSoundFolders(path: "..")))
        }
    }

    @Test func S2_symlinkEscapeIsRefused() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            let evil = try l.sound(l.outside + "/evil.wav")
            try symlink(at: l.user + "/link.wav", to: evil)
            try symlink(at: l.user + "/linkdir", to: l.outside)
            let lookup = l.lookup()
            // As a path: a file link and a folder link.
            #expect(lookup.resolve(l.user + "/link.wav") == .refused(.outsideSoundFolders(path: l.user + "/link.wav")))
            #expect(lookup.resolve(l.user + "/linkdir/evil.wav") == .refused(.outsideSoundFolders(path: l.user + "/linkdir/evil.wav")))
            // As a name: the found file's real location is checked too.
            #expect(lookup.resolve("link") == .refused(.outsideSoundFolders(path: l.user + "/link.wav")))
            // A link that stays inside the folders is fine.
            let good = try l.sound(l.project + "/good.wav")
            try symlink(at: l.user + "/alias.wav", to: good)
            #expect(lookup.resolve(l.user + "/alias.wav") == .file(good))
            #expect(lookup.resolve("alias") == .file(good))
        }
    }

    @Test func S2_symlinkedFolderIsJudgedByItsTarget() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            // The configured user folder is itself a link: files inside it are accepted.
            try makeDir(l.root + "/real-user")
            try symlink(at: l.root + "/linked-user", to: l.root + "/real-user")
            let file = try l.sound(l.root + "/real-user/x.wav")
            let lookup = SoundLookup(userFolder: l.root + "/linked-user", projectFolder: nil, dataDirs: [])
            #expect(lookup.resolve(l.root + "/linked-user/x.wav") == .file(file))
            #expect(lookup.resolve(file) == .file(file))
            #expect(lookup.resolve("x") == .file(file))
        }
    }

    @Test func S2_emptyNameAndNoFoldersAreNotFound() {
        let lookup = SoundLookup(userFolder: nil, projectFolder: nil, dataDirs: [])
        #expect(lookup.resolve("") == .notFound)
        #expect(lookup.resolve("bell") == .notFound)
        #expect(lookup.resolve("/tmp/x.wav") == .refused(.outsideSoundFolders(path: "/tmp/x.wav")))
    }

    // MARK: XDG data dirs

    @Test func S2_standardDataDirsFollowXDG() {
        #expect(SoundLookup.standardDataDirs(environment: ["HOME": "/home/a"])
            == ["/home/a/.local/share", "/usr/local/share", "/usr/share"])
        #expect(SoundLookup.standardDataDirs(environment: [
            "HOME": "/home/a", "XDG_DATA_HOME": "/data/home/", "XDG_DATA_DIRS": "/opt/share:relative:/usr/share::/opt/share",
        ]) == ["/data/home", "/opt/share", "/usr/share"])
        #expect(SoundLookup.standardDataDirs(environment: ["HOME": "/home/a", "XDG_DATA_HOME": "", "XDG_DATA_DIRS": ""])
            == ["/home/a/.local/share", "/usr/local/share", "/usr/share"])
        #expect(SoundLookup.standardDataDirs(environment: [:]) == ["/usr/local/share", "/usr/share"])
    }

    // MARK: Lookup then decode

    @Test func S2_S1_lookupThenDecodeEndToEnd() throws {
        try withTempDir { dir in
            let l = try Layout(root: dir)
            try soxFromPCM(knownPattern(frames: 480, channels: 1), rate: 48000, channels: 1,
                           to: l.system + "/sounds/freedesktop/stereo/complete.oga", type: "ogg")
            guard case .file(let path) = l.lookup().resolve("complete-download") else {
                Issue.record("not found"); return
            }
            let sound = try SoundDecoder.decode(path: path)
            #expect(sound.sampleRate == 48000 && sound.channels == 1)
        }
    }
}
