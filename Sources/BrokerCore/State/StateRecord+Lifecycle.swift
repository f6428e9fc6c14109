import BrokerCrypto

// The fields of the lifecycle's records (docs/state.md, "Format"): queued revocations and the
// reasons grants end.

extension EndReason {
    /// A reason as a record stores it.
    init(_ text: String) throws(StateDecodingError) {
        guard let reason = EndReason(rawValue: text) else { throw StateDecodingError("an unknown ending reason") }
        self = reason
    }
}

extension QueuedRevocation {
    func encode(into fields: inout FieldWriter) {
        fields.digest(1, id)
        fields.string(2, provider)
        fields.string(3, refreshToken)
        fields.string(4, accessToken)
        fields.string(5, app)
        fields.string(6, subject)
        fields.string(7, reason.rawValue)
        fields.double(8, queuedAt)
        fields.double(9, Double(attempts))
        fields.double(10, dueAt)
        if let proofKey { fields.bytes(11, proofKey.bytes) }
    }

    init(_ fields: FieldReader) throws(StateDecodingError) {
        self.init(
            id: try fields.requiredDigest(1),
            provider: try fields.requiredString(2),
            refreshToken: try fields.string(3),
            accessToken: try fields.string(4),
            app: try fields.requiredString(5),
            subject: try fields.requiredString(6),
            reason: try EndReason(fields.requiredString(7)),
            queuedAt: try fields.requiredDouble(8),
            attempts: Int(try fields.requiredDouble(9)),
            dueAt: try fields.requiredDouble(10),
            proofKey: try Session.proofKey(fields.bytes(11))
        )
    }
}
