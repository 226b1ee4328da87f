mod debian/build/php-ext/ext/modules/distlock.so
mod debian/distlock.ini
