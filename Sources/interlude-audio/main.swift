import Foundation
import InterludeCommandLine

// interlude-audio: the audio commands of `interlude` (session, interrupt, scenario, demo); see
// AudioCommands.swift. `interlude` execs this program for them.
if let why = Arguments.commandLineProblem() { exit(CommandOutput.fail(why, code: 2)) }
exit(await AudioCLI.run(Array(CommandLine.arguments.dropFirst())))
