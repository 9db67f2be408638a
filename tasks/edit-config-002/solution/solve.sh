#!/bin/bash
sed -i 's/^user=.*/user=shell/' /app/etc/rosy_basket.conf
