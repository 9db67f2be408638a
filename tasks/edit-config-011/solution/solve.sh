#!/bin/bash
sed -i 's/^mode=.*/mode=rustic/' /app/etc/brave_copper.conf
