import Foundation
import InterludeCommandLine

// interluded: composition root only; see Daemon.swift.
// Arguments that are not UTF-8 are refused (exit 2) as the CLI refuses them: `--socket $'…\xff'`
// listened on a path with U+FFFD in it, another file than the one named.
if let why = Arguments.commandLineProblem() {
    Daemon.log(why)
    Daemon.logWriter.flush()
    exit(2)
}
let status = await Daemon.run(arguments: CommandLine.arguments)
Daemon.logWriter.flush()
exit(status)
