-- How many groups each normal user may see (memberships of groups not deleted), kept by the
-- trigger below from the memberships' own `group_deleted_at`, so that the count a page of a
-- member's groups carries is one row, not a count of every membership (docs/benchmarks.md,
-- "API"). A user with no such row sees none.
CREATE TABLE member_group_counts (
    id_user  TEXT PRIMARY KEY NOT NULL REFERENCES accounts (id_user) ON DELETE CASCADE,
    visible  BIGINT NOT NULL
);

INSERT INTO member_group_counts (id_user, visible)
SELECT id_user, COUNT(*) FROM memberships WHERE group_deleted_at IS NULL GROUP BY id_user;

CREATE FUNCTION member_group_counts_keep() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    shown_before BOOLEAN := FALSE;
    shown_after BOOLEAN := FALSE;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        shown_before := OLD.group_deleted_at IS NULL;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        shown_after := NEW.group_deleted_at IS NULL;
    END IF;
    IF shown_after AND NOT shown_before THEN
        INSERT INTO member_group_counts (id_user, visible) VALUES (NEW.id_user, 1)
        ON CONFLICT (id_user) DO UPDATE SET visible = member_group_counts.visible + 1;
    ELSIF shown_before AND NOT shown_after THEN
        UPDATE member_group_counts SET visible = visible - 1 WHERE id_user = OLD.id_user;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER member_group_counts_keep AFTER INSERT OR DELETE OR UPDATE OF group_deleted_at ON memberships
FOR EACH ROW EXECUTE FUNCTION member_group_counts_keep();
