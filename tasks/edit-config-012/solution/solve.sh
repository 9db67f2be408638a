#!/bin/bash
sed -i 's/^host=.*/host=olive/' /app/etc/silent_maple.conf
