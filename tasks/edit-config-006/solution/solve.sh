#!/bin/bash
sed -i 's/^log_level=.*/log_level=kiwi/' /app/etc/humble_cinder.conf
