#!/bin/bash
sed -i 's/^host=.*/host=lily/' /app/etc/windy_plum.conf
