import Foundation

// interlude-audio: the audio commands of `interlude` (session, interrupt, scenario, demo); see
// AudioCommands.swift. `interlude` execs this program for them.
exit(await AudioCLI.run(Array(CommandLine.arguments.dropFirst())))
