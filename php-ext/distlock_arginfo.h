/* This is a generated file, edit the .stub.php file instead.
 * Stub hash: 18c015e7c477eb192bd57331b2f0545855593a8a */

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_MASK_EX(arginfo_distributedLock, 0, 0, MAY_BE_STRING|MAY_BE_LONG)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, key, IS_STRING, 0, "\'\'")
	ZEND_ARG_TYPE_MASK(0, ttl, MAY_BE_LONG|MAY_BE_DOUBLE, "60")
	ZEND_ARG_TYPE_MASK(0, random, MAY_BE_STRING|MAY_BE_LONG|MAY_BE_NULL, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, tipMsg, IS_STRING, 0, "\'\'")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_MASK_EX(arginfo_distributedUnlock, 0, 0, MAY_BE_TRUE|MAY_BE_LONG)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, key, IS_STRING, 0, "\'\'")
	ZEND_ARG_TYPE_MASK(0, random, MAY_BE_STRING|MAY_BE_LONG, "0")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Distlock_Client___construct, 0, 0, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, servers, IS_STRING, 1, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, options, IS_ARRAY, 0, "[]")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_tryLock, 0, 1, Distlock\\Lock, 1)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 0, "60.0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, flags, IS_LONG, 0, "0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, token, IS_STRING, 1, "null")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_lock, 0, 1, Distlock\\Lock, 0)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 0, "60.0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, timeout, IS_DOUBLE, 1, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, flags, IS_LONG, 0, "0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, token, IS_STRING, 1, "null")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_trySemaphore, 0, 2, Distlock\\Lock, 1)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO(0, permits, IS_LONG, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 0, "60.0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, flags, IS_LONG, 0, "0")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_semaphore, 0, 2, Distlock\\Lock, 0)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO(0, permits, IS_LONG, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 0, "60.0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, timeout, IS_DOUBLE, 1, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, flags, IS_LONG, 0, "0")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_tryLockMany, 0, 1, Distlock\\Lock, 1)
	ZEND_ARG_TYPE_INFO(0, keys, IS_ARRAY, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 0, "60.0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, flags, IS_LONG, 0, "0")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_lockMany, 0, 1, Distlock\\Lock, 0)
	ZEND_ARG_TYPE_INFO(0, keys, IS_ARRAY, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 0, "60.0")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, timeout, IS_DOUBLE, 1, "null")
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, flags, IS_LONG, 0, "0")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_OBJ_INFO_EX(arginfo_class_Distlock_Client_restoreLock, 0, 2, Distlock\\Lock, 0)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
	ZEND_ARG_TYPE_INFO(0, token, IS_STRING, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Client_holder, 0, 1, IS_ARRAY, 0)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Client_forceRelease, 0, 1, IS_LONG, 0)
	ZEND_ARG_TYPE_INFO(0, key, IS_STRING, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Client_options, 0, 0, IS_ARRAY, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Distlock_Client_servers arginfo_class_Distlock_Client_options

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Client_quorum, 0, 0, IS_LONG, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Distlock_Client_stats arginfo_class_Distlock_Client_options

ZEND_BEGIN_ARG_INFO_EX(arginfo_class_Distlock_Lock___construct, 0, 0, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_release, 0, 0, _IS_BOOL, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_extend, 0, 0, IS_DOUBLE, 0)
	ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, ttl, IS_DOUBLE, 1, "null")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_abandon, 0, 0, IS_VOID, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_validity, 0, 0, IS_DOUBLE, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Distlock_Lock_isHeld arginfo_class_Distlock_Lock_release

#define arginfo_class_Distlock_Lock_isLost arginfo_class_Distlock_Lock_release

#define arginfo_class_Distlock_Lock_check arginfo_class_Distlock_Lock_abandon

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_onLost, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, callback, IS_CALLABLE, 1)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_key, 0, 0, IS_STRING, 0)
ZEND_END_ARG_INFO()

#define arginfo_class_Distlock_Lock_keys arginfo_class_Distlock_Client_options

#define arginfo_class_Distlock_Lock_token arginfo_class_Distlock_Lock_key

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_fence, 0, 0, IS_LONG, 1)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_class_Distlock_Lock_fences, 0, 0, IS_ARRAY, 1)
ZEND_END_ARG_INFO()


ZEND_FUNCTION(distributedLock);
ZEND_FUNCTION(distributedUnlock);
ZEND_METHOD(Distlock_Client, __construct);
ZEND_METHOD(Distlock_Client, tryLock);
ZEND_METHOD(Distlock_Client, lock);
ZEND_METHOD(Distlock_Client, trySemaphore);
ZEND_METHOD(Distlock_Client, semaphore);
ZEND_METHOD(Distlock_Client, tryLockMany);
ZEND_METHOD(Distlock_Client, lockMany);
ZEND_METHOD(Distlock_Client, restoreLock);
ZEND_METHOD(Distlock_Client, holder);
ZEND_METHOD(Distlock_Client, forceRelease);
ZEND_METHOD(Distlock_Client, options);
ZEND_METHOD(Distlock_Client, servers);
ZEND_METHOD(Distlock_Client, quorum);
ZEND_METHOD(Distlock_Client, stats);
ZEND_METHOD(Distlock_Lock, __construct);
ZEND_METHOD(Distlock_Lock, release);
ZEND_METHOD(Distlock_Lock, extend);
ZEND_METHOD(Distlock_Lock, abandon);
ZEND_METHOD(Distlock_Lock, validity);
ZEND_METHOD(Distlock_Lock, isHeld);
ZEND_METHOD(Distlock_Lock, isLost);
ZEND_METHOD(Distlock_Lock, check);
ZEND_METHOD(Distlock_Lock, onLost);
ZEND_METHOD(Distlock_Lock, key);
ZEND_METHOD(Distlock_Lock, keys);
ZEND_METHOD(Distlock_Lock, token);
ZEND_METHOD(Distlock_Lock, fence);
ZEND_METHOD(Distlock_Lock, fences);


static const zend_function_entry ext_functions[] = {
	ZEND_FE(distributedLock, arginfo_distributedLock)
	ZEND_FE(distributedUnlock, arginfo_distributedUnlock)
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_Exception_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_ConfigurationException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_ConnectionException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_AcquireException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_RenewalException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_LockLostException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_LockTimeoutException_methods[] = {
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_Client_methods[] = {
	ZEND_ME(Distlock_Client, __construct, arginfo_class_Distlock_Client___construct, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, tryLock, arginfo_class_Distlock_Client_tryLock, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, lock, arginfo_class_Distlock_Client_lock, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, trySemaphore, arginfo_class_Distlock_Client_trySemaphore, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, semaphore, arginfo_class_Distlock_Client_semaphore, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, tryLockMany, arginfo_class_Distlock_Client_tryLockMany, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, lockMany, arginfo_class_Distlock_Client_lockMany, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, restoreLock, arginfo_class_Distlock_Client_restoreLock, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, holder, arginfo_class_Distlock_Client_holder, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, forceRelease, arginfo_class_Distlock_Client_forceRelease, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, options, arginfo_class_Distlock_Client_options, ZEND_ACC_PUBLIC|ZEND_ACC_STATIC)
	ZEND_ME(Distlock_Client, servers, arginfo_class_Distlock_Client_servers, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, quorum, arginfo_class_Distlock_Client_quorum, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Client, stats, arginfo_class_Distlock_Client_stats, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};


static const zend_function_entry class_Distlock_Lock_methods[] = {
	ZEND_ME(Distlock_Lock, __construct, arginfo_class_Distlock_Lock___construct, ZEND_ACC_PRIVATE)
	ZEND_ME(Distlock_Lock, release, arginfo_class_Distlock_Lock_release, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, extend, arginfo_class_Distlock_Lock_extend, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, abandon, arginfo_class_Distlock_Lock_abandon, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, validity, arginfo_class_Distlock_Lock_validity, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, isHeld, arginfo_class_Distlock_Lock_isHeld, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, isLost, arginfo_class_Distlock_Lock_isLost, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, check, arginfo_class_Distlock_Lock_check, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, onLost, arginfo_class_Distlock_Lock_onLost, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, key, arginfo_class_Distlock_Lock_key, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, keys, arginfo_class_Distlock_Lock_keys, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, token, arginfo_class_Distlock_Lock_token, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, fence, arginfo_class_Distlock_Lock_fence, ZEND_ACC_PUBLIC)
	ZEND_ME(Distlock_Lock, fences, arginfo_class_Distlock_Lock_fences, ZEND_ACC_PUBLIC)
	ZEND_FE_END
};

static zend_class_entry *register_class_Distlock_Exception(zend_class_entry *class_entry_RuntimeException)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "Exception", class_Distlock_Exception_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_RuntimeException);

	zval const_HELD_value;
	ZVAL_LONG(&const_HELD_value, DISTLOCK_PHP_CODE_HELD);
	zend_string *const_HELD_name = zend_string_init_interned("HELD", sizeof("HELD") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_HELD_name, &const_HELD_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_HELD_name);

	zval const_INVALID_value;
	ZVAL_LONG(&const_INVALID_value, DISTLOCK_PHP_CODE_INVALID);
	zend_string *const_INVALID_name = zend_string_init_interned("INVALID", sizeof("INVALID") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_INVALID_name, &const_INVALID_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_INVALID_name);

	zval const_NO_MEMORY_value;
	ZVAL_LONG(&const_NO_MEMORY_value, DISTLOCK_PHP_CODE_NOMEM);
	zend_string *const_NO_MEMORY_name = zend_string_init_interned("NO_MEMORY", sizeof("NO_MEMORY") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_NO_MEMORY_name, &const_NO_MEMORY_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_NO_MEMORY_name);

	zval const_CONNECTION_value;
	ZVAL_LONG(&const_CONNECTION_value, DISTLOCK_PHP_CODE_CONN);
	zend_string *const_CONNECTION_name = zend_string_init_interned("CONNECTION", sizeof("CONNECTION") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_CONNECTION_name, &const_CONNECTION_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_CONNECTION_name);

	zval const_TIMED_OUT_value;
	ZVAL_LONG(&const_TIMED_OUT_value, DISTLOCK_PHP_CODE_TIMEDOUT);
	zend_string *const_TIMED_OUT_name = zend_string_init_interned("TIMED_OUT", sizeof("TIMED_OUT") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_TIMED_OUT_name, &const_TIMED_OUT_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_TIMED_OUT_name);

	zval const_NO_QUORUM_value;
	ZVAL_LONG(&const_NO_QUORUM_value, DISTLOCK_PHP_CODE_NOQUORUM);
	zend_string *const_NO_QUORUM_name = zend_string_init_interned("NO_QUORUM", sizeof("NO_QUORUM") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_NO_QUORUM_name, &const_NO_QUORUM_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_NO_QUORUM_name);

	zval const_NOT_OWNER_value;
	ZVAL_LONG(&const_NOT_OWNER_value, DISTLOCK_PHP_CODE_NOTOWNER);
	zend_string *const_NOT_OWNER_name = zend_string_init_interned("NOT_OWNER", sizeof("NOT_OWNER") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_NOT_OWNER_name, &const_NOT_OWNER_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_NOT_OWNER_name);

	zval const_PROTOCOL_value;
	ZVAL_LONG(&const_PROTOCOL_value, DISTLOCK_PHP_CODE_PROTO);
	zend_string *const_PROTOCOL_name = zend_string_init_interned("PROTOCOL", sizeof("PROTOCOL") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_PROTOCOL_name, &const_PROTOCOL_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_PROTOCOL_name);

	zval const_CLOSED_value;
	ZVAL_LONG(&const_CLOSED_value, DISTLOCK_PHP_CODE_CLOSED);
	zend_string *const_CLOSED_name = zend_string_init_interned("CLOSED", sizeof("CLOSED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_CLOSED_name, &const_CLOSED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_CLOSED_name);

	zval const_CANCELED_value;
	ZVAL_LONG(&const_CANCELED_value, DISTLOCK_PHP_CODE_CANCELED);
	zend_string *const_CANCELED_name = zend_string_init_interned("CANCELED", sizeof("CANCELED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_CANCELED_name, &const_CANCELED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_CANCELED_name);

	zval const_SYSTEM_value;
	ZVAL_LONG(&const_SYSTEM_value, DISTLOCK_PHP_CODE_SYSTEM);
	zend_string *const_SYSTEM_name = zend_string_init_interned("SYSTEM", sizeof("SYSTEM") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_SYSTEM_name, &const_SYSTEM_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_SYSTEM_name);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_ConfigurationException(zend_class_entry *class_entry_Distlock_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "ConfigurationException", class_Distlock_ConfigurationException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Distlock_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_ConnectionException(zend_class_entry *class_entry_Distlock_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "ConnectionException", class_Distlock_ConnectionException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Distlock_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_AcquireException(zend_class_entry *class_entry_Distlock_ConnectionException)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "AcquireException", class_Distlock_AcquireException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Distlock_ConnectionException);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_RenewalException(zend_class_entry *class_entry_Distlock_ConnectionException)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "RenewalException", class_Distlock_RenewalException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Distlock_ConnectionException);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_LockLostException(zend_class_entry *class_entry_Distlock_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "LockLostException", class_Distlock_LockLostException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Distlock_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_LockTimeoutException(zend_class_entry *class_entry_Distlock_Exception)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "LockTimeoutException", class_Distlock_LockTimeoutException_methods);
	class_entry = zend_register_internal_class_ex(&ce, class_entry_Distlock_Exception);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_Client(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "Client", class_Distlock_Client_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NOT_SERIALIZABLE;

	zval const_FENCING_value;
	ZVAL_LONG(&const_FENCING_value, DISTLOCK_FENCING);
	zend_string *const_FENCING_name = zend_string_init_interned("FENCING", sizeof("FENCING") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_FENCING_name, &const_FENCING_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_FENCING_name);

	zval const_AUTO_RENEW_value;
	ZVAL_LONG(&const_AUTO_RENEW_value, DISTLOCK_AUTO_RENEW);
	zend_string *const_AUTO_RENEW_name = zend_string_init_interned("AUTO_RENEW", sizeof("AUTO_RENEW") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_AUTO_RENEW_name, &const_AUTO_RENEW_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_AUTO_RENEW_name);

	zval const_SHARED_value;
	ZVAL_LONG(&const_SHARED_value, DISTLOCK_SHARED);
	zend_string *const_SHARED_name = zend_string_init_interned("SHARED", sizeof("SHARED") - 1, 1);
	zend_declare_class_constant_ex(class_entry, const_SHARED_name, &const_SHARED_value, ZEND_ACC_PUBLIC, NULL);
	zend_string_release(const_SHARED_name);


	zend_add_parameter_attribute(zend_hash_str_find_ptr(&class_entry->function_table, "__construct", sizeof("__construct") - 1), 0, ZSTR_KNOWN(ZEND_STR_SENSITIVEPARAMETER), 0);

	zend_add_parameter_attribute(zend_hash_str_find_ptr(&class_entry->function_table, "__construct", sizeof("__construct") - 1), 1, ZSTR_KNOWN(ZEND_STR_SENSITIVEPARAMETER), 0);

	return class_entry;
}

static zend_class_entry *register_class_Distlock_Lock(void)
{
	zend_class_entry ce, *class_entry;

	INIT_NS_CLASS_ENTRY(ce, "Distlock", "Lock", class_Distlock_Lock_methods);
	class_entry = zend_register_internal_class_ex(&ce, NULL);
	class_entry->ce_flags |= ZEND_ACC_FINAL|ZEND_ACC_NOT_SERIALIZABLE;

	return class_entry;
}
