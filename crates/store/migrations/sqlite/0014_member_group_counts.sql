-- How many groups each normal user may see (memberships of groups not deleted), kept by the
-- triggers below from the memberships' own `group_deleted_at`, so that the count a page of a
-- member's groups carries is one row, not a count of every membership (docs/benchmarks.md,
-- "API"). A user with no such row sees none.
CREATE TABLE member_group_counts (
    id_user  TEXT PRIMARY KEY NOT NULL REFERENCES accounts (id_user) ON DELETE CASCADE,
    visible  INTEGER NOT NULL
) WITHOUT ROWID;

INSERT INTO member_group_counts (id_user, visible)
SELECT id_user, COUNT(*) FROM memberships WHERE group_deleted_at IS NULL GROUP BY id_user;

CREATE TRIGGER member_group_counts_insert AFTER INSERT ON memberships
WHEN NEW.group_deleted_at IS NULL
BEGIN
    INSERT INTO member_group_counts (id_user, visible) VALUES (NEW.id_user, 1)
    ON CONFLICT (id_user) DO UPDATE SET visible = visible + 1;
END;

CREATE TRIGGER member_group_counts_delete AFTER DELETE ON memberships
WHEN OLD.group_deleted_at IS NULL
BEGIN
    UPDATE member_group_counts SET visible = visible - 1 WHERE id_user = OLD.id_user;
END;

CREATE TRIGGER member_group_counts_hidden AFTER UPDATE OF group_deleted_at ON memberships
WHEN OLD.group_deleted_at IS NULL AND NEW.group_deleted_at IS NOT NULL
BEGIN
    UPDATE member_group_counts SET visible = visible - 1 WHERE id_user = NEW.id_user;
END;

CREATE TRIGGER member_group_counts_shown AFTER UPDATE OF group_deleted_at ON memberships
WHEN OLD.group_deleted_at IS NOT NULL AND NEW.group_deleted_at IS NULL
BEGIN
    INSERT INTO member_group_counts (id_user, visible) VALUES (NEW.id_user, 1)
    ON CONFLICT (id_user) DO UPDATE SET visible = visible + 1;
END;
