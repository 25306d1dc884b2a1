import Foundation
import InterludeCommandLine

// interlude: the command-line client; see CLI.swift.
if let why = Arguments.commandLineProblem() { exit(CommandOutput.fail(why, code: 2)) }
exit(await CLI.run(Array(CommandLine.arguments.dropFirst())))
