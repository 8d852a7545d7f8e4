namespace kcache {}
