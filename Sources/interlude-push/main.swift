import Foundation
import InterludeCommandLine

// interlude-push: `interlude push`, the provider's side of remote notifications; see PushCLI.swift.
// `interlude` execs this program for it (it links libmosquitto).
if let why = Arguments.commandLineProblem() { exit(CommandOutput.fail(why, code: 2)) }
exit(PushCLI.run(Array(CommandLine.arguments.dropFirst())))
