#!/bin/bash
sed -i 's/^retries=.*/retries=8203/' /app/etc/rapid_bison.conf
