import InterludeClient
import InterludePolicy
import InterludeWire

/// Apps connected to the daemon at `socket` through the client library, each having asked for
/// authorization with `options` (what the daemon grants follows its config), in the order named.
/// - Throws: what `InterludeClient.connect` or the request throws.
public func connectAuthorizedApps(socket: String, _ apps: [String],
                                  options: [NotificationAuthorizationOption] = [.alert]) async throws -> [InterludeClient] {
    var out: [InterludeClient] = []
    for app in apps {
        let c = try await InterludeClient.connect(socket: socket, app: app)
        _ = try await c.call(NotificationMethod.requestAuthorization, RequestAuthorizationParams(options: options),
                             as: AuthorizationResult.self)
        out.append(c)
    }
    return out
}
